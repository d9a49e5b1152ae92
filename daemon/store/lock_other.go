//go:build !unix

package store

import (
	"io/fs"
	"os"
)

const oNoFollow = 0

// lockDir only opens the lock file: there is no flock here, so two daemons on
// one directory are not detected on this platform.
func (s *Store) lockDir(path string) (*os.File, error) {
	f, err := s.openFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, wrap("opening lock file", path, err)
	}
	return f, nil
}

func linkCount(fs.FileInfo) uint64 { return 1 }

// FileUID is unknown here.
func FileUID(fs.FileInfo) int { return -1 }
