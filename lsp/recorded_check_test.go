package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordedSourcesFit: every fixture snapshot's user lines fit the
// trainer scripts they recorded (no false alarm on real inputs).
func TestRecordedSourcesFit(t *testing.T) {
	snaps, _ := filepath.Glob(filepath.Join(fixtures, "snapshots/*.pickle"))
	if len(snaps) < 3 {
		t.Fatalf("fixtures: %v", snaps)
	}
	s := New(Config{})
	s.paths.reset(nil, []string{fixtures})
	checked := 0
	for _, snap := range snaps {
		l, err := s.snaps.load(snap)
		if err != nil {
			t.Fatal(err)
		}
		for recorded := range l.byFile {
			local := s.paths.local(recorded)
			b, err := os.ReadFile(local)
			if err != nil {
				continue // a library file outside the fixtures
			}
			sites := s.paths.sitesIn(l, local)
			checked += len(sites)
			if bad := misplaced(strings.Split(string(b), "\n"), sites); len(bad) > 0 {
				t.Errorf("%s: %s: %d lines do not fit, first %+v", filepath.Base(snap), local, len(bad), bad[0])
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d recorded lines checked", checked)
	}
	t.Logf("%d recorded lines of %d snapshots fit their files", checked, len(snaps))
}

// TestStaleSourceSaid: the trainer saved with two lines inserted at the top
// after the snapshot was taken: one warning names the file; the hints stay
// where the file's lines now say (the server cannot know better).
func TestStaleSourceSaid(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	local := filepath.Join(dir, "trainer", "train_gpt2.py")
	os.MkdirAll(filepath.Dir(local), 0o755)
	os.WriteFile(local, append([]byte("import sys\nimport gc\n"), src...), 0o644)
	c := start(t, Config{}, map[string]any{"snapshot": filepath.Join(fixtures, "snapshots/gpt2_train.pickle"),
		"pathMap": []string{"/workspace/trainer=" + filepath.Dir(local)}})
	c.waitShown("gpt2_train.pickle")
	c.hints(c.open(local))
	c.hints(c.open(local))
	c.waitFor("the warning", func() bool { return len(c.msgs) > 0 })
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.msgs) != 1 || !strings.Contains(c.msgs[0], local) || !strings.Contains(c.msgs[0], "line 17 is not a line of make_batch (2 of 4 recorded lines") {
		t.Errorf("messages: %q", c.msgs)
	}
}
