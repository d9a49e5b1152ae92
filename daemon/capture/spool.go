package capture

// An agent that cannot hand an out-of-memory snapshot to a daemon (none is
// running, or it hung at the OOM) spools it in its user's cache
// (jupyter/vramscope/agent/_capture.py): oom-PID-MS-N.pickle and a sidecar
// oom-PID-MS-N.json with what agent.captured would have carried. The agent
// hands its own spool over when it next registers, but a process that has
// exited never does: the daemon imports those (daemon/spool.go). The spool is
// the user's own directory: it must be ours and not writable by others, and
// it is read through an os.Root with no symbolic link followed.

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

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
)

const maxSidecar = 1 << 20 // real ones are < 4 KiB, argv included

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

// Sidecar is what _write_sidecar writes beside a spooled snapshot.
type Sidecar struct {
	PID      int                `json:"pid"`
	Host     string             `json:"host"`
	Argv     []string           `json:"argv"`
	TimeMS   int64              `json:"time_ms"`
	Captured api.CapturedParams `json:"captured"`
}

// Spool is the spool directory, open.
type Spool struct {
	dir  string
	root *os.Root
}

// OpenSpool opens the spool directory, nil when there is none; one that is
// a symbolic link, another user's or writable by others is refused.
func OpenSpool(dir string) (*Spool, error) {
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
	return &Spool{dir, root}, nil
}

// Close closes the directory.
func (s *Spool) Close() error { return s.root.Close() }

// Path is name's path in the spool, for messages.
func (s *Spool) Path(name string) string { return filepath.Join(s.dir, name) }

// Snapshots are the bases (oom-PID-MS-N) of the spooled snapshots with a
// sidecar.
func (s *Spool) Snapshots() []string {
	f, err := s.root.Open(".")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	var bases []string
	for _, n := range names {
		if base, ok := strings.CutSuffix(n, ".json"); ok && strings.HasPrefix(base, "oom-") {
			bases = append(bases, base)
		}
	}
	return bases
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

// Claim takes base's pickle for import: it renames it first, so that an
// agent handing over its own spool at the same moment cannot hand it over
// too, and opens it. It returns the file and its path, or nil and no error
// when the agent took it first. After the import: Imported, SetAside or
// Unclaim.
func (s *Spool) Claim(base string) (*os.File, string, error) {
	claimed := base + ".pickle.importing"
	if err := s.root.Rename(base+".pickle", claimed); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil // its agent took it
		}
		return nil, "", err
	}
	f, err := openPrivate(s.root, claimed)
	if err != nil {
		s.Unclaim(base)
		return nil, "", err
	}
	return f, s.Path(claimed), nil
}

// Imported removes base's claimed pickle and its sidecar.
func (s *Spool) Imported(base string) {
	s.root.Remove(base + ".pickle.importing")
	s.root.Remove(base + ".json")
}

// SetAside renames base's claimed pickle and its sidecar out of the way: not
// a snapshot, they are not tried again at every scan.
func (s *Spool) SetAside(base string) {
	s.root.Rename(base+".pickle.importing", base+".pickle.refused")
	s.root.Rename(base+".json", base+".json.refused")
}

// Unclaim gives base's pickle its name back: the next scan tries again.
func (s *Spool) Unclaim(base string) {
	s.root.Rename(base+".pickle.importing", base+".pickle")
}

// Sidecar reads and checks base's sidecar: its pid must be the one in its
// name.
func (s *Spool) Sidecar(base string) (Sidecar, error) {
	var side Sidecar
	f, err := openPrivate(s.root, base+".json")
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
