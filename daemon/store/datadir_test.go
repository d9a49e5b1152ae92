//go:build unix

package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The attacks of the campaign on a data directory others could write to,
// each with the store run as the tests' user (root in CI: the victims are
// root's files). Open must refuse, naming the path and the problem, and
// leave the victim as it was.

// victim is a file outside the data directory, with its content.
func victim(t *testing.T) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(p, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, "keep me\n"
}

// privateDir is a data directory of ours, mode 0700, inside a private
// parent.
func privateDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// refused opens dir and wants an error that says all of want.
func refused(t *testing.T, dir string, want ...string) {
	t.Helper()
	s, err := Open(dir, Limits{})
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) accepted it", dir)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open(%s): %v; want it to say %q", dir, err, w)
		}
	}
}

func unchanged(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s: %q, %v; want it untouched", path, b, err)
	}
}

// TestLockSymlinkNotFollowed: a lock symlink to another file; the campaign's
// daemon, as root, wrote its PID into a root-owned file through it.
func TestLockSymlinkNotFollowed(t *testing.T) {
	dir := privateDir(t)
	v, content := victim(t)
	os.Symlink(v, filepath.Join(dir, "lock"))
	refused(t, dir, filepath.Join(dir, "lock"), "symbolic link")
	unchanged(t, v, content)
}

// TestLockHardLinkRefused: a lock file with another name (a hard link made
// while the directory was open to others) is not written to.
func TestLockHardLinkRefused(t *testing.T) {
	dir := privateDir(t)
	v := filepath.Join(dir, "precious")
	os.WriteFile(v, []byte("keep me\n"), 0o600)
	if err := os.Link(v, filepath.Join(dir, "lock")); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, filepath.Join(dir, "lock"), "2 hard links")
	unchanged(t, v, "keep me\n")
}

// TestCacheSymlinkNotEmptied: a cache symlink to another tree; the
// campaign's daemon emptied a root-owned tree through it at recovery.
func TestCacheSymlinkNotEmptied(t *testing.T) {
	dir := privateDir(t)
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "not-a-snapshot"), []byte("keep me\n"), 0o600)
	os.Symlink(tree, filepath.Join(dir, "cache"))
	refused(t, dir, filepath.Join(dir, "cache"), "symbolic link")
	unchanged(t, filepath.Join(tree, "not-a-snapshot"), "keep me\n")
}

// TestSnapshotsSymlinkNotFollowed: a snapshots symlink to a directory with a
// .tmp-* file; the campaign's daemon deleted it as a leftover of its own.
func TestSnapshotsSymlinkNotFollowed(t *testing.T) {
	dir := privateDir(t)
	other := t.TempDir()
	tmp := filepath.Join(other, ".tmp-123")
	os.WriteFile(tmp, []byte("keep me\n"), 0o600)
	os.Symlink(other, filepath.Join(dir, "snapshots"))
	refused(t, dir, filepath.Join(dir, "snapshots"), "symbolic link")
	unchanged(t, tmp, "keep me\n")
}

// TestCacheEntrySymlinkRemovedNotFollowed: an entry of cache/ that links to
// another tree is removed as a stale cache, and the tree is left alone.
func TestCacheEntrySymlinkRemovedNotFollowed(t *testing.T) {
	dir := privateDir(t)
	open(t, dir, Limits{}).Close()
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "x"), []byte("keep me\n"), 0o600)
	link := filepath.Join(dir, "cache", "20261129T110203.123Z-0001")
	os.Symlink(tree, link)
	s := open(t, dir, Limits{})
	if _, err := os.Lstat(link); err == nil {
		t.Errorf("the stale link %s stays (recovered: %v)", link, s.Recovered())
	}
	unchanged(t, filepath.Join(tree, "x"), "keep me\n")
}

// TestDataDirWritableByOthersRefused: a data directory others may write to,
// with or without the sticky bit, and one inside a parent others may write
// to without it.
func TestDataDirWritableByOthersRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, os.ModeSticky | 0o777} {
		dir := privateDir(t)
		os.Chmod(dir, mode)
		refused(t, dir, dir, "writable by others")
		if _, err := os.Lstat(filepath.Join(dir, "lock")); err == nil {
			t.Errorf("mode %o: a lock file was made", mode)
		}
	}
	parent := filepath.Join(t.TempDir(), "open")
	os.Mkdir(parent, 0o700)
	os.Chmod(parent, 0o777)
	dir := filepath.Join(parent, "data")
	os.Mkdir(dir, 0o700)
	refused(t, dir, parent, "without the sticky bit")
	sticky := filepath.Join(t.TempDir(), "sticky")
	os.Mkdir(sticky, 0o700)
	os.Chmod(sticky, os.ModeSticky|0o777)
	open(t, filepath.Join(sticky, "data"), Limits{}) // as /tmp: others cannot rename ours
}

// TestDataDirOfAnotherUserRefused: a data directory, or one of its
// directories, or its lock file, that belongs to another uid is not used.
func TestDataDirOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	dir := privateDir(t)
	os.Chown(dir, 65534, 65534)
	refused(t, dir, dir, "belongs to uid 65534")
	for _, name := range []string{"incoming", "snapshots", "cache", "groups"} {
		dir := privateDir(t)
		open(t, dir, Limits{}).Close()
		os.Mkdir(filepath.Join(dir, name), 0o700)
		os.Chown(filepath.Join(dir, name), 65534, 65534)
		refused(t, dir, filepath.Join(dir, name), "belongs to uid 65534")
	}
	dir = privateDir(t)
	os.WriteFile(filepath.Join(dir, "lock"), nil, 0o600)
	os.Chown(filepath.Join(dir, "lock"), 65534, 65534)
	refused(t, dir, filepath.Join(dir, "lock"), "belongs to uid 65534")
}

// TestDataDirThroughLinkResolved: a --data-dir reached through a symbolic
// link is used by its real path (the link could be pointed elsewhere
// later; agents are told the real incoming directory).
func TestDataDirThroughLinkResolved(t *testing.T) {
	real := privateDir(t)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(real, link)
	s := open(t, link, Limits{})
	if s.Dir() != real || s.IncomingDir() != filepath.Join(real, "incoming") {
		t.Errorf("Dir %s, IncomingDir %s; want them under %s", s.Dir(), s.IncomingDir(), real)
	}
}
