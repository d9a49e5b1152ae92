package daemon

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/vramscope/vramscope/daemon/api"
)

// checkIncoming refuses a file handed to commit (agent.captured's path, the
// part snapshot.take asked for) unless it is a regular file strictly inside
// the incoming directory, named *.part (store.CheckPart). Commit removes the
// file when its analysis fails: given the incoming directory itself as a
// path, it removed the directory, and every later import and capture failed
// until a restart. A named pipe there made the analysis wait for ever.
func (d *Daemon) checkIncoming(part string) error {
	dir := d.store.IncomingDir()
	if !filepath.IsAbs(part) || !inDir(part, dir) {
		return rpcErr(api.CodeInvalidParams, "%s is not in the incoming directory %s", part, dir)
	}
	if _, err := d.store.CheckPart(part); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rpcErr(api.CodeBadSnapshot, "%v", err)
		}
		return rpcErr(api.CodeInvalidParams, "%v", err)
	}
	return nil
}
