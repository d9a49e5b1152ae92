package export

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestExportConnsCap: at the cap a newcomer closes the oldest idle
// keep-alive connection; when every connection is inside a request the
// newcomer is closed instead, and the requests finish.
func TestExportConnsCap(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := NewConns(l, 2)
	release := make(chan struct{})
	srv := &http.Server{ConnState: conns.State, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(conns)
	defer srv.Close()
	addr := l.Addr().String()
	get := func(path string) (net.Conn, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		return c, nil
	}
	first, err := get("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get("/"); err != nil {
		t.Fatal(err)
	}
	// Both idle as the server sees them, before the third.
	waitBusy(t, conns, 0)
	if _, err := get("/"); err != nil { // the third: the first, idle, makes room
		t.Fatalf("a newcomer at the cap: %v", err)
	}
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := first.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the oldest idle connection is still open (%d, %v)", n, err)
	}
	if n := conns.count(); n != 2 {
		t.Errorf("%d connections open, the cap is 2", n)
	}

	// Two requests in flight hold both places: a newcomer is closed. The
	// server marks a connection idle only after its response went out, and a
	// connection with no request yet counts as idle: so each slow request
	// starts once the one before is inside its request (else the second
	// could evict the first before it began; under -race the test then
	// waited for ever, 2026-12-03).
	waitBusy(t, conns, 0)
	slow := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { _, err := get("/slow"); slow <- err }()
		waitBusy(t, conns, i+1)
	}
	if _, err := get("/"); err == nil {
		t.Error("a newcomer got in with every connection inside a request")
	}
	close(release)
	for i := 0; i < 2; i++ {
		if err := <-slow; err != nil {
			t.Errorf("a request in flight: %v", err)
		}
	}
}

// waitBusy waits until n connections are inside a request (10 s at most).
func waitBusy(t *testing.T, l *Conns, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); l.busy() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d connections inside a request, want %d", l.busy(), n)
		}
	}
}

// count is how many connections are open.
func (l *Conns) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// busy is how many connections are inside a request.
func (l *Conns) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.open {
		if !c.idle {
			n++
		}
	}
	return n
}
