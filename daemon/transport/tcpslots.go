package transport

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound the connections of the loopback TCP listener, so that peers
// without the token (any local user) cannot exhaust the daemon's file
// descriptors or memory. The Unix socket has its own budget: it is not
// counted here and never refused for TCP's sake. docs/security.md has the
// figures and the tests.
type Limits struct {
	HelloTimeout time.Duration // a connection not past daemon.hello by then is closed; default 5 s
	PendingPeer  int           // connections not yet past hello, per user (per address where the user is unknown); default 8
	Pending      int           // connections not yet past hello, in all; default 32
	Authed       int           // connections past hello (they proved the token), in all; default 256
}

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = Limits{HelloTimeout: 5 * time.Second, PendingPeer: 8, Pending: 32, Authed: 256}

// Defaults gives each zero field its default.
func (l *Limits) Defaults() {
	if l.HelloTimeout <= 0 {
		l.HelloTimeout = DefaultLimits.HelloTimeout
	}
	if l.PendingPeer <= 0 {
		l.PendingPeer = DefaultLimits.PendingPeer
	}
	if l.Pending <= 0 {
		l.Pending = DefaultLimits.Pending
	}
	if l.Authed <= 0 {
		l.Authed = DefaultLimits.Authed
	}
}

// Slots counts the TCP listener's connections against Limits. A
// connection takes a pending slot when it is accepted, trades it for an
// authenticated one when daemon.hello proves the token, and gives back what
// it holds when it ends.
//
// Pending slots are what any local user can take, so a full count never
// turns a newcomer away: it evicts a pending connection, of the newcomer's
// own peer when that peer is at PendingPeer, else of the peer with the most
// pending: the oldest that has sent nothing, else the oldest. A peer is the
// user at the other end (tcpPeerUID), or the address where that is unknown:
// one user can bind every address of 127/8 (32 idle connections from them
// once locked every client out), but cannot be another uid. So another
// user's connections never push a token holder out, and idle ones of its own
// uid go before it, however fast they are opened again.
type Slots struct {
	lim     Limits
	mu      sync.Mutex
	waiting *list.List     // pending *Slot, oldest first
	peers   map[string]int // pending connections by peer address
	authed  int
}

// Slot is one connection's place in Slots.
type Slot struct {
	peer  string   // "uid N", or the address when the uid is unknown
	conn  net.Conn // asked whether bytes wait in it (unread)
	state slotState
	el    *list.Element    // in waiting while pending
	evict func(why string) // tells the connection why and closes it
	heard atomic.Bool      // the daemon has read a byte of it
}

// silent: the peer has sent nothing yet (the daemon has read nothing, and
// nothing waits to be read).
func (s *Slot) silent() bool { return !s.heard.Load() && unread(s.conn) == 0 }

// heardConn is a TCP connection that marks its slot heard at the first byte
// read from it.
type heardConn struct {
	net.Conn
	slot *Slot
}

func (c heardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.slot.heard.Store(true)
	}
	return n, err
}

// CloseWrite is the TCP connection's (the wire half-closes before it closes).
func (c heardConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

type slotState int

const (
	slotPending slotState = iota
	slotAuthed
	slotGone // released or evicted: holds nothing
)

// NewSlots counts connections against lim.
func NewSlots(lim Limits) *Slots {
	return &Slots{lim: lim, waiting: list.New(), peers: map[string]int{}}
}

// PeerOf is what a connection is counted under: the uid at its other end,
// else its IP without the port (every connection from one address has its
// own port).
func PeerOf(c net.Conn) string {
	if uid := tcpPeerUID(c); uid >= 0 {
		return fmt.Sprintf("uid %d", uid)
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// Admit takes a pending slot for the new connection c, evicting another
// pending connection (through its evict) when the limits are reached. It
// returns c wrapped to mark the slot heard.
func (t *Slots) Admit(c net.Conn, evict func(why string)) (*Slot, net.Conn) {
	peer := PeerOf(c)
	t.mu.Lock()
	victim, why := t.victim(peer)
	if victim != nil {
		t.unpend(victim)
	}
	s := &Slot{peer: peer, conn: c, evict: evict}
	s.el = t.waiting.PushBack(s)
	t.peers[peer]++
	t.mu.Unlock()
	if victim != nil {
		victim.evict(why)
	}
	return s, heardConn{c, s}
}

// victim is the pending slot a newcomer from peer replaces, if any, and what
// its connection is told. t.mu must be held.
func (t *Slots) victim(peer string) (*Slot, string) {
	if t.peers[peer] >= t.lim.PendingPeer {
		return t.quietest(func(s *Slot) bool { return s.peer == peer }),
			fmt.Sprintf("closed without daemon.hello: %d other connections from %s are waiting for it (the limit for one user); say hello as soon as you connect, or use the Unix socket", t.lim.PendingPeer, peer)
	}
	if t.waiting.Len() >= t.lim.Pending {
		most := t.busiest()
		return t.quietest(func(s *Slot) bool { return s.peer == most }),
			fmt.Sprintf("closed without daemon.hello: %d other TCP connections are waiting for it (the limit); say hello as soon as you connect, or use the Unix socket", t.lim.Pending)
	}
	return nil, ""
}

// busiest is the peer with the most pending connections (of peers with as
// many, the one whose connection has waited longest). t.mu must be held.
func (t *Slots) busiest() string {
	most, n := "", 0
	for el := t.waiting.Front(); el != nil; el = el.Next() {
		if p := el.Value.(*Slot).peer; t.peers[p] > n {
			most, n = p, t.peers[p]
		}
	}
	return most
}

// quietest is the oldest pending slot of those that match that has sent
// nothing, else the oldest that matches. t.mu must be held.
func (t *Slots) quietest(match func(*Slot) bool) *Slot {
	var oldest *Slot
	for el := t.waiting.Front(); el != nil; el = el.Next() {
		s := el.Value.(*Slot)
		if !match(s) {
			continue
		}
		if s.silent() {
			return s
		}
		if oldest == nil {
			oldest = s
		}
	}
	return oldest
}

// ErrBusy is the error of a connection the limits leave no room for.
var ErrBusy = errors.New("too many connections")

// busy is an ErrBusy that says why.
type busy string

func (b busy) Error() string { return string(b) }
func (busy) Unwrap() error   { return ErrBusy }

// Promote trades s's pending slot for an authenticated one; an ErrBusy when
// the limit of authenticated connections is reached or s was evicted.
func (t *Slots) Promote(s *Slot) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case s.state == slotGone:
		return busy("this connection was closed to make room for newer ones before its daemon.hello was read; connect again")
	case s.state == slotAuthed:
		return nil
	case t.authed >= t.lim.Authed:
		return busy(fmt.Sprintf("%d TCP connections are open already (the limit); close one, or use the Unix socket", t.authed))
	}
	t.unpend(s)
	s.state = slotAuthed
	t.authed++
	return nil
}

// Release gives back what s held.
func (t *Slots) Release(s *Slot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s.state {
	case slotAuthed:
		t.authed--
	case slotPending:
		t.unpend(s)
	}
	s.state = slotGone
}

// unpend takes pending s out of the count. t.mu must be held.
func (t *Slots) unpend(s *Slot) {
	t.waiting.Remove(s.el)
	if t.peers[s.peer]--; t.peers[s.peer] <= 0 {
		delete(t.peers, s.peer) // the map holds only peers with connections waiting
	}
	s.state = slotGone
}

// Waiting is how many connections of peer (PeerOf) wait for hello.
func (t *Slots) Waiting(peer string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[peer]
}

// Counts are the slots taken, for tests and the status.
func (t *Slots) Counts() (pending, authed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waiting.Len(), t.authed
}
