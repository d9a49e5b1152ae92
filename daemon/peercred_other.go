//go:build !linux

package daemon

import "net"

// peerUID is unknown off Linux; the socket's 0600 mode and 0700 directory
// are the protection there.
func peerUID(net.Conn) (int, error) { return -1, nil }

func umask(m int) int { return m }

// peerPID is unknown off Linux.
func peerPID(net.Conn) int { return 0 }

// otherPIDNamespace: no pid namespaces off Linux.
func otherPIDNamespace(int) bool { return false }
