package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon/store"
)

// maxSocketPath is the longest path a Unix socket address can hold on Linux.
const maxSocketPath = 107

// The daemon may run as root with its socket in a shared directory, so it
// changes only what it made: it creates the socket's directory (0700) when
// there is none and never changes the mode of one that exists; it replaces
// nothing at the socket's path but a dead socket of its own user; and the
// socket and token it removes at the end are the ones it made (OwnedFile).

// ListenUnix listens on path with mode 0600, after checking the directory
// and what is at path already.
func ListenUnix(path string) (net.Listener, *OwnedFile, error) {
	if len(path) > maxSocketPath {
		return nil, nil, fmt.Errorf("socket path %s is %d bytes; Unix sockets allow %d (set --socket or XDG_RUNTIME_DIR to a shorter directory)", path, len(path), maxSocketPath)
	}
	if err := socketDir(filepath.Dir(path)); err != nil {
		return nil, nil, err
	}
	if err := clearSocketPath(path); err != nil {
		return nil, nil, err
	}
	old := umask(0o177)
	l, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	// The listener would unlink path when closed, even if it is no longer
	// ours by then; Close removes it through OwnedFile instead.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	own, err := own(path)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, own, nil
}

// socketDir makes dir (and its parents, 0700) when it does not exist; one that
// does is used as it is if it is safe: see checkDir.
func socketDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating socket directory %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	return checkDir(dir, fi)
}

// checkDir refuses a directory that another user could use to swap the
// daemon's socket or token for theirs: one owned by anyone but us or root,
// or one others may write to without the sticky bit (which keeps them from
// renaming or deleting our files, as in /tmp).
func checkDir(dir string, fi fs.FileInfo) error {
	if uid := store.FileUID(fi); uid >= 0 && uid != os.Getuid() && uid != 0 {
		return fmt.Errorf("directory %s belongs to uid %d, not to you (uid %d) or root", dir, uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s is writable by others (mode %04o) without the sticky bit: another user could replace the daemon's files there; use a directory of your own", dir, fi.Mode().Perm())
	}
	return nil
}

// clearSocketPath makes sure nothing is at path, removing only a dead socket
// of our own: it refuses any other file, a socket a daemon answers on, and a
// socket of another user.
func clearSocketPath(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket path %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%s); not replacing it: remove it or pass another --socket", path, store.FileKind(fi.Mode()))
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("a daemon is already listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s is a socket that cannot be checked (%v); not replacing it", path, err)
	}
	if uid := store.FileUID(fi); uid >= 0 && uid != os.Getuid() {
		return fmt.Errorf("%s is a dead socket of uid %d, not yours; not replacing it", path, uid)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing dead socket %s: %w", path, err)
	}
	return nil
}

// OwnedFile is a file the daemon made, identified by its inode, so that the
// daemon removes it at the end only if it is still the same file.
type OwnedFile struct {
	path string
	fi   fs.FileInfo
}

func own(path string) (*OwnedFile, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return &OwnedFile{path, fi}, nil
}

// remove removes the file if it is still the one the daemon made.
func (o *OwnedFile) Remove() {
	if o == nil {
		return
	}
	if fi, err := os.Lstat(o.path); err == nil && os.SameFile(fi, o.fi) {
		os.Remove(o.path)
	}
}

// ListenTCP listens on a loopback address only, as serve --tcp asks.
func ListenTCP(addr string) (net.Listener, error) { return ListenLoopback("--tcp", addr) }

// ListenLoopback listens on a loopback TCP address only (localhost is
// 127.0.0.1); errors name the flag. vramscope mcp --http uses it too.
func ListenLoopback(flag, addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v", flag, addr, err)
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
		addr = net.JoinHostPort("127.0.0.1", addr[len(host)+1:])
	}
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s %q: only loopback addresses are allowed (127.0.0.1 or ::1); forward a port over SSH to reach it remotely", flag, addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return l, nil
}

// ErrOtherUser refuses a Unix connection from another user (SO_PEERCRED).
var ErrOtherUser = errors.New("connection from another user refused")
