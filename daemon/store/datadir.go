package store

// The data directory is held to the socket directory's rule, because the
// daemon may run as root and be pointed (--data-dir) at a directory others
// can reach: it must belong to the daemon's user or root and be writable by
// nobody else, its ancestors must not let another user rename it away, and
// every file operation goes through an os.Root opened on it, which follows no
// symbolic link out of it. Its subdirectories (incoming, snapshots, cache,
// groups) and the lock file must be real directories and files of ours: a
// symbolic link or another user's entry there is refused, never used.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// openDataDir checks abs (which exists, its links resolved) and its
// ancestors and opens it as a Root.
func openDataDir(abs string) (*os.Root, error) {
	if err := checkAncestors(abs); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, wrap("opening data directory", abs, err)
	}
	fi, err := root.Stat(".")
	if err == nil {
		err = checkPrivateDir(abs, fi)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// checkPrivateDir refuses a directory the store cannot trust: a symbolic
// link, one that belongs to another user, one others may write to (even
// with the sticky bit: they could make the store's own names first).
func checkPrivateDir(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("store: data directory %s: %s is a symbolic link; the store follows none: remove it", filepath.Dir(path), path)
	case !fi.IsDir():
		return fmt.Errorf("store: data directory %s: %s is %s, not a directory", filepath.Dir(path), path, FileKind(fi.Mode()))
	}
	if uid := FileUID(fi); uid >= 0 && uid != os.Geteuid() && uid != 0 {
		return fmt.Errorf("store: data directory %s belongs to uid %d, not to you (uid %d) or root; use a directory of your own", path, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("store: data directory %s is writable by others (mode %04o): another user could plant files or symbolic links in it; run chmod go-w %s, or use a directory of your own", path, fi.Mode().Perm(), path)
	}
	return nil
}

// checkAncestors refuses a data directory whose parents another user could
// use to swap it for theirs: a parent of another user (not root), or one
// everybody may write to without the sticky bit. A parent its group may
// write to is let be: under a umask of 002 with a group of one's own
// (Fedora's default) ~/.local is 0775.
func checkAncestors(abs string) error {
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return wrap("checking data directory's parent", p, err)
		}
		if uid := FileUID(fi); uid >= 0 && uid != os.Geteuid() && uid != 0 {
			return fmt.Errorf("store: data directory %s is inside %s, which belongs to uid %d: that user could replace it; use a directory of your own", abs, p, uid)
		}
		if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("store: data directory %s is inside %s, which everybody may write to (mode %04o) without the sticky bit: they could replace it; use a directory of your own", abs, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// subdir makes (or checks) the store's directory name inside the data
// directory.
func (s *Store) subdir(name string) error {
	p := filepath.Join(s.dir, name)
	if err := s.root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return wrap("creating directory", p, err)
	}
	fi, err := s.root.Lstat(name)
	if err != nil {
		return wrap("checking directory", p, err)
	}
	return checkPrivateDir(p, fi)
}

// rel is abs inside the data directory, as the Root names it.
func (s *Store) rel(abs string) (string, error) {
	r, err := filepath.Rel(s.dir, abs)
	if err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("store: %s is not inside the data directory %s", abs, s.dir)
	}
	return r, nil
}

// The file operations of the store, on absolute paths inside the data
// directory, through its Root.

func (s *Store) remove(abs string) error {
	r, err := s.rel(abs)
	if err != nil {
		return err
	}
	return s.root.Remove(r)
}

func (s *Store) removeAll(abs string) error {
	r, err := s.rel(abs)
	if err != nil {
		return err
	}
	return s.root.RemoveAll(r)
}

func (s *Store) rename(from, to string) error {
	rf, err := s.rel(from)
	if err != nil {
		return err
	}
	rt, err := s.rel(to)
	if err != nil {
		return err
	}
	return s.root.Rename(rf, rt)
}

func (s *Store) openFile(abs string, flag int, perm fs.FileMode) (*os.File, error) {
	r, err := s.rel(abs)
	if err != nil {
		return nil, err
	}
	return s.root.OpenFile(r, flag|oNoFollow, perm)
}

func (s *Store) lstat(abs string) (fs.FileInfo, error) {
	r, err := s.rel(abs)
	if err != nil {
		return nil, err
	}
	return s.root.Lstat(r)
}

func (s *Store) mkdir(abs string) error {
	r, err := s.rel(abs)
	if err != nil {
		return err
	}
	return s.root.Mkdir(r, 0o700)
}

func (s *Store) readDir(abs string) ([]fs.DirEntry, error) {
	f, err := s.openFile(abs, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func (s *Store) readFile(abs string) ([]byte, error) {
	f, err := s.openFile(abs, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (s *Store) syncDir(abs string) error {
	f, err := s.openFile(abs, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// createTemp creates a new file named tmpPrefix and random hex in dir.
func (s *Store) createTemp(dir string) (*os.File, string, error) {
	for {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(dir, tmpPrefix+hex.EncodeToString(b[:]))
		f, err := s.openFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
}

// openDirs makes or checks the store's directories; groups/ is made when the
// first group is written, and checked now if it is there.
func (s *Store) openDirs() error {
	for _, name := range []string{"incoming", "snapshots", "cache"} {
		if err := s.subdir(name); err != nil {
			return err
		}
	}
	if _, err := s.root.Lstat(groupsName); err == nil {
		return s.subdir(groupsName)
	}
	return nil
}

// The daemon's own operations on files of IncomingDir (its streams' FIFOs
// and part files), through the Root; each refuses a path elsewhere.

// CreateIncoming creates the new file path in IncomingDir (mode 0600, never
// over an existing file or through a link).
func (s *Store) CreateIncoming(path string) (*os.File, error) {
	if err := s.inIncoming(path); err != nil {
		return nil, err
	}
	return s.openFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// OpenIncoming opens path in IncomingDir with flag (a FIFO opened without
// O_NONBLOCK waits for the other end), following no link.
func (s *Store) OpenIncoming(path string, flag int) (*os.File, error) {
	if err := s.inIncoming(path); err != nil {
		return nil, err
	}
	return s.openFile(path, flag, 0)
}

// RemoveIncoming removes path from IncomingDir.
func (s *Store) RemoveIncoming(path string) error {
	if err := s.inIncoming(path); err != nil {
		return err
	}
	return s.remove(path)
}

func (s *Store) inIncoming(path string) error {
	if filepath.Dir(path) != s.incoming {
		return fmt.Errorf("store: %s is not in %s", path, s.incoming)
	}
	return nil
}
