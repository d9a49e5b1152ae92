package daemon

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/daemon/store"
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
		return fail(errInvalid, "%s is not in the incoming directory %s", part, dir)
	}
	if _, err := d.store.CheckPart(part); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fail(errBadSnapshot, "%v", err)
		}
		return fail(errInvalid, "%v", err)
	}
	return nil
}

// checkCapturedBy refuses a file agent a may not hand over with
// agent.captured: one the daemon made (an import being copied, a capture it
// asked another agent for: committing it would delete it under its owner),
// or an OOM capture named for another process (oom-PID-..., the agents'
// names).
func checkCapturedBy(a *agent, part string) error {
	name := filepath.Base(part)
	if strings.HasPrefix(name, store.OwnPrefix) {
		return fail(errInvalid, "%s is a file the daemon made for another request, not one this agent wrote", part)
	}
	if rest, ok := strings.CutPrefix(name, "oom-"); ok {
		pid, _, _ := strings.Cut(rest, "-")
		p := a.process()
		if n, err := strconv.Atoi(pid); err == nil && n != p.PID && (a.nsPID == 0 || n != a.nsPID) {
			return fail(errInvalid, "%s is the capture of process %s, not of this agent's (%d)", part, pid, p.PID)
		}
	}
	return nil
}
