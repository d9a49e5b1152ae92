package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
)

// importPath is the file snapshot.import names, absolute. The daemon's
// working directory means nothing to a client, so a relative path needs the
// client's own (cwd) to be resolved against.
func importPath(p api.ImportParams) (string, error) {
	switch {
	case p.Path == "":
		return "", fail(errInvalid, "snapshot.import needs a path")
	case filepath.IsAbs(p.Path):
		return filepath.Clean(p.Path), nil
	case p.Cwd == "":
		return "", fail(errInvalid, "snapshot.import: %q is a relative path, and the daemon's working directory is not yours: send an absolute path, or cwd (the directory it is relative to)", p.Path)
	case !filepath.IsAbs(p.Cwd):
		return "", fail(errInvalid, "snapshot.import: cwd %q is not an absolute path", p.Cwd)
	}
	return filepath.Join(p.Cwd, p.Path), nil
}

// importable says why path cannot be imported, before the store copies it:
// it must be a regular file the daemon can read (a directory or a named pipe
// is not a snapshot, and reading a pipe could wait for ever).
func importable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fail(errBadSnapshot, "cannot read %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fail(errBadSnapshot, "%s is %s, not a snapshot file", path, store.FileKind(fi.Mode()))
	}
	return nil
}
