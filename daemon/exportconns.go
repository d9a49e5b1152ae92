package daemon

import (
	"net"
	"net/http"
	"sync"
)

// exportConns caps the metrics listener's open connections. At the cap a
// newcomer replaces the oldest connection that is between requests (idle
// keep-alive, or connected without a request yet); when every connection is
// inside a request the newcomer is closed at once. Either way the listener
// never holds more than max descriptors, and idle connections cannot keep a
// scraper out.
type exportConns struct {
	net.Listener
	max   int
	mu    sync.Mutex
	open  []*exportConn // oldest first
	evict func()        // notes a connection closed to make room (the log)
}

// exportConn is one accepted connection and whether it is between requests.
type exportConn struct {
	net.Conn
	l    *exportConns
	idle bool // guarded by l.mu
	once sync.Once
}

func newExportConns(l net.Listener, max int) *exportConns {
	return &exportConns{Listener: l, max: max, evict: func() {}}
}

// Accept returns the next connection admitted under the cap.
func (l *exportConns) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ec := &exportConn{Conn: c, l: l, idle: true}
		if l.admit(ec) {
			return ec, nil
		}
		c.Close() // every connection is in a request: the peer may try again
	}
}

// admit adds ec, making room by closing the oldest idle connection.
func (l *exportConns) admit(ec *exportConn) bool {
	l.mu.Lock()
	var victim *exportConn
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
		l.evict()
	}
	return true
}

// drop forgets c. l.mu must be held.
func (l *exportConns) drop(c *exportConn) {
	for i, o := range l.open {
		if o == c {
			l.open = append(l.open[:i], l.open[i+1:]...)
			return
		}
	}
}

// state is the http.Server's ConnState hook: it tells idle connections
// from those inside a request.
func (l *exportConns) state(c net.Conn, st http.ConnState) {
	ec, ok := c.(*exportConn)
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
func (c *exportConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.drop(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
