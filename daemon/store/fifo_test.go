package store

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStageRefusesFIFO: importing a named pipe is refused at once, with an
// error naming it. A plain open of it waited for a writer for ever, holding
// an OS thread; a thousand such imports exhausted the daemon's threads.
func TestStageRefusesFIFO(t *testing.T) {
	s := open(t, t.TempDir(), Limits{})
	dir := t.TempDir()
	fifo := filepath.Join(dir, "snap.pickle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	for _, src := range []string{fifo, dir} {
		done := make(chan error, 1)
		go func() {
			_, err := s.Stage(src)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Stage(%s): %v", src, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Stage(%s) still waits after 10 s", src)
		}
	}
	if left, _ := os.ReadDir(s.IncomingDir()); len(left) != 0 {
		t.Errorf("incoming keeps %v", left)
	}
	// A FIFO in the incoming directory, named like a part, is no part.
	part := s.NewIncoming("fifo")
	if err := syscall.Mkfifo(part, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckPart(part); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("CheckPart of a FIFO: %v", err)
	}
	for _, p := range []string{s.IncomingDir(), s.IncomingDir() + "/", filepath.Join(s.IncomingDir(), "."), filepath.Dir(s.IncomingDir())} {
		if _, err := s.CheckPart(p); err == nil {
			t.Errorf("CheckPart(%s) accepted a directory", p)
		}
	}
}
