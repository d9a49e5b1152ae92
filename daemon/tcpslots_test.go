package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/daemon/transport"
)

// dialFrom opens a TCP connection to addr from the loopback address src
// (Linux answers on all of 127/8, so one machine can be many peers).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedWith reads what the daemon says to a connection it turns away: one
// error and the end.
func refusedWith(t *testing.T, c net.Conn) (int64, string) {
	t.Helper()
	r := bufio.NewReader(c)
	rep := readReply(t, r, c)
	if rep.Error == nil {
		t.Fatalf("answered %+v, want an error", rep)
	}
	if !closed(t, r, c) {
		t.Error("the refused connection stays open")
	}
	return rep.Error.Code, rep.Error.Message
}

// TestHelloTimeout: a TCP connection that has not proved the token within
// HelloTimeout is told so and closed, whether it sends nothing or a byte at a
// time; one that has proved it stays.
func TestHelloTimeout(t *testing.T) {
	d, cfg := testDaemon(t, func(c *Config) {
		c.TCP = "127.0.0.1:0"
		c.TCPLimits.HelloTimeout = 300 * time.Millisecond
	})
	idle := dialFrom(t, "127.0.0.1", d.Addr())
	slow := dialFrom(t, "127.0.0.1", d.Addr())
	go func() {
		for _, b := range []byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.hello","params":{}}`) {
			if _, err := slow.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	start := time.Now()
	for name, c := range map[string]net.Conn{"idle": idle, "slow": slow} {
		code, msg := refusedWith(t, c)
		if code != api.CodeUnauthorized || !strings.Contains(msg, "within 300ms") {
			t.Errorf("%s: %d %q", name, code, msg)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("closed after %s", took)
	}
	tok, _ := os.ReadFile(cfg.TokenFile)
	c, err := client.DialTCP(context.Background(), d.Addr(), strings.TrimSpace(string(tok)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(600 * time.Millisecond)
	call(t, c, api.Status, nil, &api.StatusResult{})
}

// TestTCPSlots: connections waiting for hello are capped per peer (a user,
// where the kernel says which), and a newcomer past the cap evicts the
// oldest waiting connection of its peer, which is told why, from whatever
// address it came; connections past hello are capped in all; the Unix
// socket serves its owner throughout; slots come back when connections end.
func TestTCPSlots(t *testing.T) {
	d, cfg := testDaemon(t, func(c *Config) {
		c.TCP = "127.0.0.1:0"
		c.TCPLimits = TCPLimits{HelloTimeout: time.Minute, PendingPeer: 3, Pending: 5, Authed: 2}
	})
	addr := d.Addr()
	var waiting []net.Conn
	for i := 0; i < 3; i++ {
		waiting = append(waiting, dialFrom(t, fmt.Sprintf("127.0.0.%d", 1+i), addr))
		waitSlots(t, d, i+1, 0) // accepted in this order: the first is the oldest
	}
	waiting = append(waiting, dialFrom(t, "127.0.0.9", addr))
	code, msg := refusedWith(t, waiting[0])
	if code != api.CodeBusy || !strings.Contains(msg, "other connections from "+transport.PeerOf(waiting[1])) {
		t.Errorf("the oldest of one peer, at a 4th: %d %q", code, msg)
	}
	waitSlots(t, d, 3, 0)
	call(t, dial(t, cfg.Socket), api.Status, nil, &api.StatusResult{}) // the owner's socket is not TCP's
	for _, c := range waiting {
		c.Close()
	}
	waitSlots(t, d, 0, 0)
	tok, _ := os.ReadFile(cfg.TokenFile)
	hello := func() (*client.Client, error) {
		return client.DialTCP(context.Background(), addr, strings.TrimSpace(string(tok)), "test")
	}
	for i := 0; i < 2; i++ {
		c, err := hello()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	waitSlots(t, d, 0, 2)
	if _, err := hello(); client.Code(err) != api.CodeBusy {
		t.Errorf("3rd past hello: %v", err)
	}
	waitSlots(t, d, 0, 2)
}

// waitSlots waits for the daemon's TCP slots to read pending and authed.
func waitSlots(t *testing.T, d *Daemon, pending, authed int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if p, a := d.tcp.Counts(); p == pending && a == authed {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p, a := d.tcp.Counts()
	t.Fatalf("slots: %d pending, %d authed; want %d, %d", p, a, pending, authed)
}

// TestBeforeHelloOneAnswer: before hello, a TCP peer gets one answer and the
// end of the connection, whatever it sends (each hostile message of
// testdata/wire, or a thousand requests in one write: the daemon does not
// start a goroutine for each).
func TestBeforeHelloOneAnswer(t *testing.T) {
	d, _ := testDaemon(t, func(c *Config) { c.TCP = "127.0.0.1:0" })
	files, _ := filepath.Glob("testdata/wire/*")
	var pipelined []byte
	for i := 0; i < 1000; i++ {
		pipelined = append(pipelined, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"daemon.status"}`+"\n", i)...)
	}
	inputs := map[string][]byte{"1000 requests": pipelined}
	for _, f := range files {
		inputs[f], _ = os.ReadFile(f)
	}
	for name, msg := range inputs {
		before := d.requests.Load()
		c := dialFrom(t, "127.0.0.1", d.Addr())
		r := sendAll(c, msg)
		if rep := readReply(t, r, c); rep.Error == nil {
			t.Errorf("%s: answered %s without an error", name, rep.Result)
		}
		if !closed(t, r, c) {
			t.Errorf("%s: a second answer or an open connection", name)
		}
		if n := d.requests.Load() - before; n > 1 {
			t.Errorf("%s: %d requests handled", name, n)
		}
	}
}

// TestTokenHolderThroughIdleFlood: another user keeps 64 idle connections
// open from 64 addresses across 127/8 and opens a new one whenever one is
// closed (the campaign's 32 idle connections from across 127/8 kept a token
// holder out 40 times of 40). That user holds at most PendingPeer of them;
// when the daemon's own user fills the rest, a newcomer at the total cap
// evicts the other user's; and a token holder gets in 40 times of 40.
func TestTokenHolderThroughIdleFlood(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running the peers as another user needs root")
	}
	d, cfg := testDaemon(t, func(c *Config) {
		c.TCP = "127.0.0.1:0"
		c.TCPLimits = TCPLimits{HelloTimeout: time.Minute, PendingPeer: 8, Pending: 12}
	})
	addr := d.Addr()
	flood := startHelper(t, "TestHelperIdleFlood", "VRAMSCOPE_HELPER_IDLE="+addr)
	defer flood.stop()
	waitPeer(t, d, "uid 65534", 8)
	for i := 0; i < 4; i++ {
		dialFrom(t, "127.0.0.1", addr)
	}
	waitSlots(t, d, 12, 0)
	// At the total cap the busiest peer gives way: two more of ours take
	// the other user's places (which it takes back from itself, or, once
	// level, from ours: ours stay at 5 or more).
	dialFrom(t, "127.0.0.1", addr)
	waitPeer(t, d, transport.PeerOf(dialFrom(t, "127.0.0.1", addr)), 5)
	tok, _ := os.ReadFile(cfg.TokenFile)
	in := 0
	for i := 0; i < 40; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := client.DialTCP(ctx, addr, strings.TrimSpace(string(tok)), "test")
		if err == nil {
			err = c.Call(ctx, api.Status, nil, &api.StatusResult{})
			c.Close()
		}
		cancel()
		if err != nil {
			t.Errorf("try %d: %v", i, err)
			continue
		}
		in++
	}
	if n := d.tcp.Waiting("uid 65534"); n > 8 {
		t.Errorf("the other user holds %d connections waiting for hello", n)
	}
	t.Logf("%s; the token holder got in %d times of 40", flood.said, in)
}

// waitPeer waits until peer has at least n connections waiting for hello.
func waitPeer(t *testing.T, d *Daemon, peer string, n int) {
	t.Helper()
	got := 0
	for i := 0; i < 500; i++ {
		got = d.tcp.Waiting(peer)
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s has %d connections waiting; want %d", peer, got, n)
}

// TestHelperIdleFlood is the child of TestTokenHolderThroughIdleFlood: 64
// idle connections from 64 addresses, each opened again when the daemon
// closes it (40 times at most), until stdin closes.
func TestHelperIdleFlood(t *testing.T) {
	addr := os.Getenv("VRAMSCOPE_HELPER_IDLE")
	if addr == "" {
		t.Skip("helper process only")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dials atomic.Int64
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &net.TCPAddr{IP: net.IPv4(127, byte(1+i/16), byte(i%16), 2)}
			for n := 0; n < 40; n++ {
				c, err := (&net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}).Dial("tcp", addr)
				if err != nil {
					return
				}
				dials.Add(1)
				go func() { <-stop; c.Close() }()
				io.Copy(io.Discard, c) // idle until the daemon closes it
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	fmt.Printf("flood: uid %d keeps 64 idle connections from 64 addresses (%d opened so far)\n", os.Getuid(), dials.Load())
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
	close(stop)
	wg.Wait()
}
