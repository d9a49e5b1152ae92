package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDiskFull runs the store on a 2 MiB tmpfs. It needs root (CAP_SYS_ADMIN)
// to mount one; CI runs as root.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a 2 MiB tmpfs (CI runs the tests as root)")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): no CAP_SYS_ADMIN?", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
	s, err := Open(filepath.Join(mnt, "store"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // runs before the unmount
	free := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
	empty := func(what string) {
		t.Helper()
		if l := s.List(); len(l) != 0 {
			t.Errorf("%s: listed %v", what, ids(l))
		}
		for _, d := range []string{"incoming", "snapshots", "cache"} {
			if n := names(t, filepath.Join(s.Dir(), d)); len(n) != 0 {
				t.Errorf("%s: %s/ holds %q", what, d, n)
			}
		}
	}
	src := t.TempDir() // on the ordinary disk
	file := func(name string, size int64) string {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, int(size)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := free()

	// 3 MB does not fit: the copy into incoming/ fails.
	_, err = s.Import(file("big.pickle", 3<<20), Meta{})
	t.Log(err)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), s.IncomingDir()+"/") ||
		!strings.Contains(err.Error(), ".part") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Import of 3 MB on a 2 MB disk: %v; want ENOSPC naming the .part file", err)
	}
	empty("after the failed copy")
	if got := free(); got != before {
		t.Errorf("%d bytes free after the failure, %d before: space was not given back", got, before)
	}

	// Exactly as much as is free: the pickle fits, its meta file does not.
	_, err = s.Import(file("exact.pickle", before), Meta{})
	t.Log(err)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "writing snapshot meta "+filepath.Join(s.Dir(), "snapshots")) {
		t.Fatalf("Import filling the disk exactly: %v; want ENOSPC naming the meta file", err)
	}
	empty("after the failed meta write")
	if got := free(); got != before {
		t.Errorf("%d bytes free after the failure, %d before: space was not given back", got, before)
	}

	// Space was freed: a small import succeeds.
	m, err := s.Import(file("small.pickle", 100<<10), Meta{})
	if err != nil {
		t.Fatalf("small Import after the failures: %v", err)
	}
	if err := s.Verify(m.ID); err != nil {
		t.Fatal(err)
	}
	if l := s.List(); len(l) != 1 || l[0] != m {
		t.Fatalf("List = %v", ids(l))
	}
}
