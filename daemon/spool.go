package daemon

// An agent that cannot hand an out-of-memory snapshot to a daemon (none is
// running, or it hung at the OOM) spools it in its user's cache
// (jupyter/vramscope/agent/_capture.py): oom-PID-MS-N.pickle and a sidecar
// oom-PID-MS-N.json with what agent.captured would have carried. The agent
// hands its own spool over when it next registers, but a process that has
// exited never does: the daemon imports those, at start, every
// spoolInterval and when an agent goes. The spool is the user's own
// directory: it must be ours and not writable by others, and it is read
// through an os.Root with no symbolic link followed.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
)

const (
	spoolInterval = 30 * time.Second
	maxSidecar    = 1 << 20 // real ones are < 4 KiB, argv included
)

// DefaultSpoolDir is where agents spool: $XDG_CACHE_HOME/vramscope/spool,
// else ~/.cache/vramscope/spool (the rule of _paths.spool_dir).
func DefaultSpoolDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "vramscope", "spool")
}

// sidecar is what _write_sidecar writes beside a spooled snapshot.
type sidecar struct {
	PID      int                `json:"pid"`
	Host     string             `json:"host"`
	Argv     []string           `json:"argv"`
	TimeMS   int64              `json:"time_ms"`
	Captured api.CapturedParams `json:"captured"`
}

// watchSpool imports the spool now and every spoolInterval until done.
func (d *Daemon) watchSpool(done <-chan struct{}) {
	t := time.NewTicker(spoolInterval)
	defer t.Stop()
	for {
		d.importSpool()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// importSpool imports every spooled snapshot whose process has exited, one
// scan at a time.
func (d *Daemon) importSpool() {
	if d.cfg.Spool == "" {
		return
	}
	d.spoolMu.Lock()
	defer d.spoolMu.Unlock()
	root, err := openSpool(d.cfg.Spool)
	if root == nil {
		if err != nil {
			d.cfg.Logf("spool: %v", err)
		}
		return
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		if base, ok := strings.CutSuffix(n, ".json"); ok && strings.HasPrefix(base, "oom-") {
			if err := d.importSpooled(root, base); err != nil {
				d.cfg.Logf("spool: %s: %v", filepath.Join(d.cfg.Spool, n), err)
			}
		}
	}
}

// openSpool opens the spool directory, nil when there is none; one that is
// a symbolic link, another user's or writable by others is refused.
func openSpool(dir string) (*os.Root, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is %s, not a directory; not importing from it", dir, store.FileKind(fi.Mode()))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if fi, err = root.Stat("."); err == nil {
		err = privateEntry(dir, fi)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// privateEntry refuses a spool entry another user could have made or
// changed.
func privateEntry(path string, fi fs.FileInfo) error {
	if uid := store.FileUID(fi); uid >= 0 && uid != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you; not importing it", path, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %04o); not importing from it", path, fi.Mode().Perm())
	}
	return nil
}

// importSpooled imports the snapshot base (oom-PID-MS-N) if its process has
// exited. It claims the pickle by a rename first, so that an agent handing
// over its own spool at the same moment cannot hand it over too.
func (d *Daemon) importSpooled(root *os.Root, base string) error {
	side, err := readSidecar(root, base)
	if err != nil {
		return err
	}
	if side.Host != d.host || !processGone(side.PID, side.TimeMS) {
		return nil // its own agent hands it over (or another host's daemon)
	}
	claimed := base + ".pickle.importing"
	if err := root.Rename(base+".pickle", claimed); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // its agent took it
		}
		return err
	}
	m, err := d.importClaimed(root, claimed, side)
	if err != nil {
		if errors.Is(err, errBadSnapshot) {
			// Not a snapshot: set aside, not tried again every spoolInterval.
			root.Rename(claimed, base+".pickle.refused")
			root.Rename(base+".json", base+".json.refused")
			return err
		}
		root.Rename(claimed, base+".pickle") // the next scan tries again
		return err
	}
	root.Remove(claimed)
	root.Remove(base + ".json")
	d.cfg.Logf("spool: imported %s (the out-of-memory snapshot of pid %d, which has exited) as %s", base, side.PID, m.ID)
	go d.publishOOM(d.snapshotResult(m), side.Captured.OOM)
	return nil
}

// importClaimed copies the claimed pickle into the store and commits it,
// with the meta agent.captured would have given it.
func (d *Daemon) importClaimed(root *os.Root, name string, side sidecar) (store.Meta, error) {
	f, err := openPrivate(root, name)
	if err != nil {
		return store.Meta{}, err
	}
	defer f.Close()
	path := filepath.Join(d.cfg.Spool, name)
	part, err := d.store.StageFrom(f, path)
	if err != nil {
		return store.Meta{}, err
	}
	c := side.Captured
	meta := store.Meta{Reason: "oom", Source: firstArg(side.Argv), PID: side.PID, Host: side.Host,
		Device: c.Device, Entries: c.Entries, TookMS: c.TookMS, Label: "spooled"}
	return d.commit(part, path, meta)
}

// readSidecar reads and checks base's sidecar: its pid must be the one in
// its name.
func readSidecar(root *os.Root, base string) (sidecar, error) {
	var side sidecar
	f, err := openPrivate(root, base+".json")
	if err != nil {
		return side, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSidecar+1))
	if err != nil {
		return side, err
	}
	if len(b) > maxSidecar {
		return side, fmt.Errorf("larger than %d bytes", maxSidecar)
	}
	if err := json.Unmarshal(b, &side); err != nil {
		return side, err
	}
	pid, _, _ := strings.Cut(strings.TrimPrefix(base, "oom-"), "-")
	if n, err := strconv.Atoi(pid); err != nil || n != side.PID || n <= 0 {
		return side, fmt.Errorf("the sidecar names pid %d, the file %s", side.PID, pid)
	}
	return side, nil
}

// openPrivate opens a regular file of ours in root (no symbolic link, no
// other name, nobody else's), without waiting on a FIFO.
func openPrivate(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s, not a regular file", store.FileKind(fi.Mode()))
	}
	if err == nil {
		err = privateEntry(name, fi)
	}
	if err == nil && linkCount(fi) > 1 {
		err = fmt.Errorf("it has %d hard links", linkCount(fi))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
