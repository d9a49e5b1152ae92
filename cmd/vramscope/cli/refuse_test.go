package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConvertChecksLikeAnalyze: convert refuses, with analyze's error, every
// VSM1 stream analyze refuses (testdata/convert/gen.py makes them), and
// bytes after the end frame. It used to exit 0 and write a pickle vramscope
// could not read. Nothing is left behind.
func TestConvertChecksLikeAnalyze(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "convert")
	out := filepath.Join(dir, "good.pickle")
	mustRun(t, "convert", filepath.Join(src, "good.vsm"), "-o", out)
	mustRun(t, "analyze", out)
	for name, want := range map[string]string{
		"trailing.vsm":       "18 bytes after the VSM1 end frame",
		"entry_not_dict.vsm": "entry 1 is a int, not a dict",
		"segments_int.vsm":   `"segments" is a int, not a list`,
		"no_action.vsm":      "not trace entries",
		"frames_int.vsm":     "frames is a int, not a list",
	} {
		in := filepath.Join(src, name)
		a := run("analyze", in)
		if a.code != 2 || !strings.Contains(a.stderr, want) {
			t.Errorf("analyze %s: %v", name, a)
		}
		out := filepath.Join(dir, name+".pickle")
		c := run("convert", in, "-o", out)
		if c.code != 2 || c.stderr != a.stderr {
			t.Errorf("convert %s: %v\nwant analyze's error: %s", name, c, a.stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("convert %s wrote %s", name, out)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestFIFORefused: analyze, flame and convert refuse a named pipe at once,
// naming it; they used to wait for a writer for ever.
func TestFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "snap.pickle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	for _, args := range [][]string{{"analyze", fifo}, {"flame", fifo, "--format", "json"}, {"convert", fifo}} {
		done := make(chan outcome, 1)
		go func() { done <- run(args...) }()
		select {
		case o := <-done:
			if o.code != 2 || !strings.Contains(o.stderr, fifo) || !strings.Contains(o.stderr, "named pipe") {
				t.Errorf("%s: %v", args[0], o)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s of a FIFO still waits after 10 s", args[0])
		}
	}
}
