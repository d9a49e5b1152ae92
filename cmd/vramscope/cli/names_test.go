package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNamesFlag: --names gives recorded files the names texts use for them
// (the notebook names its cells' files "cell [3]"): finding titles and fixes
// and phase names ("[backward pass of cell [3]:171]" in the flame graph) say
// them, while files and lines stay the recorded ones. A bad names
// file is an input error naming it.
func TestNamesFlag(t *testing.T) {
	snap := "../../../examples/snapshots/findings/cache_growth.pickle"
	recorded := "/work/main/examples/record/record_findings.py" // where the recording ran
	names := filepath.Join(t.TempDir(), "names.json")
	os.WriteFile(names, []byte(`{"`+recorded+`": "cell [3]"}`), 0o644)

	plain := mustRun(t, "analyze", "--json", snap).stdout
	named := mustRun(t, "analyze", "--json", "--names", names, snap).stdout
	if !strings.Contains(plain, "record_findings.py:168 kept") {
		t.Fatalf("the recording no longer has its cache finding at record_findings.py:168")
	}
	var r struct {
		Findings []struct{ Title, Fix, File string } `json:"findings"`
		Sites    []struct{ File, Function string }   `json:"sites"`
	}
	if err := json.Unmarshal([]byte(named), &r); err != nil {
		t.Fatal(err)
	}
	titled := false
	for _, f := range r.Findings {
		if strings.Contains(f.Title+f.Fix, "record_findings.py:") {
			t.Errorf("finding still names the file: %q / %q", f.Title, f.Fix)
		}
		titled = titled || strings.Contains(f.Title, "cell [3]:168 kept")
	}
	if !titled {
		t.Error("the cache finding's title does not use the name")
	}
	for _, s := range r.Sites {
		if s.File != "" && s.File != recorded && strings.HasSuffix(s.File, "record_findings.py") {
			t.Errorf("a site's file changed: %s", s.File)
		}
	}
	// Backward passes are phase frames of the flame graph.
	if !strings.Contains(mustRun(t, "flame", "--format", "json", snap).stdout, "[backward pass of record_findings.py:") {
		t.Fatal("the recording no longer has a backward pass frame")
	}
	tree := mustRun(t, "flame", "--format", "json", "--names", names, snap).stdout
	if !strings.Contains(tree, "[backward pass of cell [3]:") || strings.Contains(tree, "[backward pass of record_findings.py:") {
		t.Error("the flame graph's phase frames do not use the name")
	}

	os.WriteFile(names, []byte(`["not", "an object"]`), 0o644)
	o := run("analyze", "--names", names, snap)
	if o.code == 0 || !strings.Contains(o.stderr, names) {
		t.Errorf("a bad names file: %v", o)
	}
}

// TestNamesNotAFile: --names of a FIFO hung for ever, of /dev/zero read
// until memory ran out; a regular file past 16 MiB is refused too. Each is
// a quick error naming the file.
func TestNamesNotAFile(t *testing.T) {
	snap := abs(t, example(t, "example_train"))
	dir := t.TempDir()
	fifo := filepath.Join(dir, "names.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o600); err != nil || os.Truncate(big, 17<<20) != nil {
		t.Fatal("making a 17 MiB file")
	}
	for file, want := range map[string]string{fifo: "named pipe", "/dev/zero": "character device", big: "more than"} {
		done := make(chan outcome, 1)
		go func() { done <- run("analyze", "--names", file, snap) }()
		select {
		case o := <-done:
			if o.code != 2 || !strings.Contains(o.stderr, file) || !strings.Contains(o.stderr, want) {
				t.Errorf("--names %s: %v", file, o)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("--names %s: no answer in 20 s", file)
		}
	}
}
