package export

import (
	"net"
	"net/http"
	"sync"
)

// Conns caps the metrics listener's open connections. At the cap a
// newcomer replaces the oldest connection that is between requests (idle
// keep-alive, or connected without a request yet); when every connection is
// inside a request the newcomer is closed at once. Either way the listener
// never holds more than max descriptors, and idle connections cannot keep a
// scraper out.
type Conns struct {
	net.Listener
	max     int
	mu      sync.Mutex
	open    []*conn // oldest first
	Evicted func()  // notes a connection closed to make room (the log)
}

// conn is one accepted connection and whether it is between requests.
type conn struct {
	net.Conn
	l    *Conns
	idle bool // guarded by l.mu
	once sync.Once
}

// NewConns caps l's open connections at max.
func NewConns(l net.Listener, max int) *Conns {
	return &Conns{Listener: l, max: max, Evicted: func() {}}
}

// Accept returns the next connection admitted under the cap.
func (l *Conns) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ec := &conn{Conn: c, l: l, idle: true}
		if l.admit(ec) {
			return ec, nil
		}
		c.Close() // every connection is in a request: the peer may try again
	}
}

// admit adds ec, making room by closing the oldest idle connection.
func (l *Conns) admit(ec *conn) bool {
	l.mu.Lock()
	var victim *conn
	if len(l.open) >= l.max {
		for _, c := range l.open {
			if c.idle {
				victim = c
				break
			}
		}
		if victim == nil {
			l.mu.Unlock()
			return false
		}
		l.drop(victim)
	}
	l.open = append(l.open, ec)
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		l.Evicted()
	}
	return true
}

// drop forgets c. l.mu must be held.
func (l *Conns) drop(c *conn) {
	for i, o := range l.open {
		if o == c {
			l.open = append(l.open[:i], l.open[i+1:]...)
			return
		}
	}
}

// State is the http.Server's ConnState hook: it tells idle connections
// from those inside a request.
func (l *Conns) State(c net.Conn, st http.ConnState) {
	ec, ok := c.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateActive:
		ec.idle = false
	case http.StateIdle:
		ec.idle = true
	case http.StateClosed, http.StateHijacked:
		l.drop(ec)
	}
}

// Close closes the connection and gives back its place.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.drop(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
