//go:build !linux

package transport

import "net"

// PeerUID is unknown off Linux; the socket's 0600 mode and 0700 directory
// are the protection there.
func PeerUID(net.Conn) (int, error) { return -1, nil }

func umask(m int) int { return m }

// PeerPID is unknown off Linux.
func PeerPID(net.Conn) int { return 0 }

// OtherPIDNamespace: no pid namespaces off Linux.
func OtherPIDNamespace(int) bool { return false }
