package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/daemon/store"
)

// TestStreamOntoFullDisk: a streamed capture whose part file cannot be
// written (a 64 KiB tmpfs) fails as the store's failure, -32007 "no space
// left", not as an unreadable snapshot.
func TestStreamOntoFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	d, _ := testDaemon(t, func(c *Config) { c.DataDir = filepath.Join(mnt, "data") })
	vsm := vsmOfFixture(t, fixtures+"gpt2_train.pickle")
	if len(vsm) < 128<<10 {
		t.Fatalf("the stream is %d bytes: too small to fill the tmpfs", len(vsm))
	}
	part := d.store.NewIncoming("x")
	s := capture.OpenStream(d.store, part)
	if s == nil {
		t.Skip("no FIFOs here")
	}
	go func() {
		if w, err := os.OpenFile(s.FIFO(), os.O_WRONLY, 0); err == nil {
			w.Write(vsm) // fails once the disk is full and the reader stops
			w.Close()
		}
	}()
	_, err := d.commitStreamed(part, s.Wait(context.Background()), store.Meta{})
	if re := wireError(err); err == nil || re.Code != api.CodeStoreFailed || !strings.Contains(re.Message, "no space left") {
		t.Errorf("stream onto a full disk: %v; want code %d saying no space left", err, api.CodeStoreFailed)
	}
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Errorf("part file left behind: %v", err)
	}
}
