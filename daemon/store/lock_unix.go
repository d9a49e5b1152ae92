//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

// lockDir opens the lock file path (through the store's Root, following no
// symbolic link) and takes an exclusive, non-blocking flock on it, which the
// kernel releases when the process dies. It writes our PID into the file so
// that a second daemon's error can name the holder; so it refuses a file it
// did not make: another user's, or one with other names (a hard link).
func (s *Store) lockDir(path string) (*os.File, error) {
	if fi, err := s.lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("store: %s is a symbolic link; the store follows none: remove it", path)
	}
	f, err := s.openFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, wrap("opening lock file", path, err)
	}
	if err := checkOwnFile(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := s.readFile(path); rerr == nil && strings.TrimSpace(string(b)) != "" {
				holder = "pid " + strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("%w: %s is locked by %s (is another vramscope daemon using %s?): %w",
				ErrLocked, path, holder, filepath.Dir(path), err)
		}
		return nil, wrap("locking", path, err)
	}
	// Best effort: only used in the message above.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// linkCount is the number of hard links of the file fi describes.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// FileUID is the owner of the file fi describes, -1 when unknown (the
// store's and the daemon's ownership rules both read it).
func FileUID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// checkOwnFile refuses an open file the store would write to but cannot have
// made: not a regular file, another user's, or hard-linked elsewhere.
func checkOwnFile(f *os.File, path string) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return wrap("checking", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("store: %s is %s, not a regular file; remove it", path, FileKind(fi.Mode()))
	case FileUID(fi) != os.Geteuid():
		return fmt.Errorf("store: %s belongs to uid %d, not to you (uid %d): another user made it; remove it", path, FileUID(fi), os.Geteuid())
	case linkCount(fi) > 1:
		return fmt.Errorf("store: %s has %d hard links: another name could be a file the store must not write; remove it", path, linkCount(fi))
	}
	return nil
}
