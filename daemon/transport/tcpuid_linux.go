package transport

import (
	"encoding/binary"
	"net"
	"syscall"
)

// tcpPeerUID is the uid owning the other end of a loopback TCP connection,
// -1 when unknown. Both ends live in this kernel, so the peer's socket can be
// looked up by its addresses (sock_diag, as ss -e does); the lookup needs no
// privilege. It lets Slots count pending connections per user: one user
// may open connections from every address of 127/8, not from every uid.
func tcpPeerUID(c net.Conn) int {
	peer, ok1 := c.RemoteAddr().(*net.TCPAddr)
	self, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || !peer.IP.IsLoopback() {
		return -1
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return -1
	}
	defer syscall.Close(fd)
	tv := syscall.Timeval{Usec: 100_000} // the kernel answers at once; never hold the accept loop
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	if err := syscall.Sendto(fd, diagRequest(peer, self), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return -1
	}
	buf := make([]byte, 1024)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return -1
	}
	return diagUID(buf[:n])
}

const (
	netlinkSockDiag   = 4  // NETLINK_SOCK_DIAG
	sockDiagByFamily  = 20 // SOCK_DIAG_BY_FAMILY
	nlmsgHeaderLen    = 16
	inetDiagReqLen    = 56 // struct inet_diag_req_v2
	inetDiagMsgUIDOff = 64 // offset of idiag_uid in struct inet_diag_msg
)

// diagRequest asks for the one TCP socket whose local end is src and remote
// end dst (struct nlmsghdr + struct inet_diag_req_v2).
func diagRequest(src, dst *net.TCPAddr) []byte {
	b := make([]byte, nlmsgHeaderLen+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], sockDiagByFamily)
	ne.PutUint16(b[6:], syscall.NLM_F_REQUEST)
	r := b[nlmsgHeaderLen:]
	r[0], r[1] = syscall.AF_INET, syscall.IPPROTO_TCP
	srcIP, dstIP := src.IP.To4(), dst.IP.To4()
	if srcIP == nil || dstIP == nil {
		r[0], srcIP, dstIP = syscall.AF_INET6, src.IP.To16(), dst.IP.To16()
	}
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	binary.BigEndian.PutUint16(r[8:], uint16(src.Port))
	binary.BigEndian.PutUint16(r[10:], uint16(dst.Port))
	copy(r[12:28], srcIP)
	copy(r[28:44], dstIP)
	ne.PutUint32(r[48:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(r[52:], ^uint32(0))
	return b
}

// diagUID reads idiag_uid from the kernel's answer, -1 for an error or an
// answer too short.
func diagUID(b []byte) int {
	ne := binary.NativeEndian
	if len(b) < nlmsgHeaderLen+inetDiagMsgUIDOff+4 || ne.Uint16(b[4:]) != sockDiagByFamily {
		return -1
	}
	return int(ne.Uint32(b[nlmsgHeaderLen+inetDiagMsgUIDOff:]))
}
