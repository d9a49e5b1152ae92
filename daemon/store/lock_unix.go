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

// lockDir opens path and takes an exclusive, non-blocking flock on it, which
// the kernel releases when the process dies. It writes our PID into the file
// so that a second daemon's error can name the holder.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, wrap("opening lock file", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil && strings.TrimSpace(string(b)) != "" {
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
