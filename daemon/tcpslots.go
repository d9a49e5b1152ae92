package daemon

import (
	"fmt"
	"net"
	"sync"
)

// tcpSlots counts the TCP listener's connections against TCPLimits. A
// connection takes a pending slot (of its peer address and of the total) when
// it is accepted, trades it for an authenticated one when daemon.hello proves
// the token, and gives back what it holds when it ends. Pending slots are
// what any local user can take; they come back within HelloTimeout.
type tcpSlots struct {
	lim     TCPLimits
	mu      sync.Mutex
	peers   map[string]int // pending connections by peer address
	pending int
	authed  int
}

func newTCPSlots(lim TCPLimits) *tcpSlots {
	return &tcpSlots{lim: lim, peers: map[string]int{}}
}

// peerOf is the address a connection is counted under: its IP, without the
// port (every connection from one address has its own port).
func peerOf(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// admit takes a pending slot for a new connection from peer.
func (t *tcpSlots) admit(peer string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.peers[peer] >= t.lim.PendingPeer {
		return fmt.Errorf("%d connections from %s are already waiting for daemon.hello (the limit per address); try again in %s, or use the Unix socket", t.peers[peer], peer, t.lim.HelloTimeout)
	}
	if t.pending >= t.lim.Pending {
		return fmt.Errorf("%d TCP connections are already waiting for daemon.hello (the limit); try again in %s, or use the Unix socket", t.pending, t.lim.HelloTimeout)
	}
	t.peers[peer]++
	t.pending++
	return nil
}

// promote trades peer's pending slot for an authenticated one.
func (t *tcpSlots) promote(peer string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.authed >= t.lim.Authed {
		return fmt.Errorf("%d TCP connections are open already (the limit); close one, or use the Unix socket", t.authed)
	}
	t.unpend(peer)
	t.authed++
	return nil
}

// release gives back what a connection from peer held.
func (t *tcpSlots) release(peer string, authed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if authed {
		t.authed--
		return
	}
	t.unpend(peer)
}

func (t *tcpSlots) unpend(peer string) {
	t.pending--
	if t.peers[peer]--; t.peers[peer] <= 0 {
		delete(t.peers, peer) // the map holds only peers with connections waiting
	}
}

// counts are the slots taken, for tests and the status.
func (t *tcpSlots) counts() (pending, authed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending, t.authed
}
