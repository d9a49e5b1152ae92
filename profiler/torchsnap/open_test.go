package torchsnap

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/profiler"
)

// TestReadFileRefusesFIFO: a named pipe (or a directory) is refused at once,
// with an error naming it. The open used to wait for a writer for ever.
func TestReadFileRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "snap.pickle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	for path, kind := range map[string]string{fifo: "named pipe", dir: "directory"} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(path, profiler.NewFrames(), nil, Options{})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.HasPrefix(err.Error(), path+": not a regular file") || !strings.Contains(err.Error(), kind) {
				t.Errorf("ReadFile(%s): %v", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadFile(%s) still waits after 10 s", path)
		}
	}
}
