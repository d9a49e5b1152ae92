package torchsnap

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenFile opens a snapshot file for reading, refusing anything but a regular
// file. The open itself never waits: a plain open of a named pipe blocks its
// OS thread until a writer comes, and a daemon asked to read a thousand of
// them ran out of threads. So the file is opened non-blocking and checked by
// fstat (the file opened, not one that replaced it since a stat) before a
// byte is read; a regular file reads the same either way. Errors are
// *fs.PathError naming the file.
func OpenFile(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("not a regular file but %s", fileKind(fi.Mode()))}
	}
	return f, fi, nil
}

// fileKind names a file's type in words.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a " + m.Type().String()
}
