//go:build linux

package daemon

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// peerUID is the uid of the process at the other end of a Unix connection,
// from SO_PEERCRED.
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("not a Unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if serr != nil {
		return -1, serr
	}
	return int(cred.Uid), nil
}

// checkOwner refuses a socket directory someone else owns.
func checkOwner(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket directory %s belongs to uid %d, not to you (uid %d)", dir, st.Uid, os.Getuid())
	}
	return nil
}

func umask(m int) int { return syscall.Umask(m) }
