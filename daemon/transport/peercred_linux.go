//go:build linux

package transport

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// PeerUID is the uid of the process at the other end of a Unix connection,
// from SO_PEERCRED.
func PeerUID(c net.Conn) (int, error) {
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

func umask(m int) int { return syscall.Umask(m) }

// PeerPID is the pid of the process at the other end of a Unix connection as
// this daemon's pid namespace sees it (the kernel translates it), 0 when
// unknown.
func PeerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// OtherPIDNamespace reports whether pid lives in another pid namespace than
// the daemon (a container's), where the pid it knows itself by means
// nothing here. Unreadable (another user's process): false.
func OtherPIDNamespace(pid int) bool {
	self, err1 := os.Readlink("/proc/self/ns/pid")
	other, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	return err1 == nil && err2 == nil && self != other
}
