package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
)

// These tests attack a daemon process (vramscope serve --tcp) as another
// local user could, without the token, and measure what it costs the daemon.

// serveTCP starts the daemon binary with a TCP listener under a file
// descriptor limit and returns its pid, socket and TCP address.
func serveTCP(t *testing.T, nofile int) (int, string, string) {
	t.Helper()
	pid, socket := serveLimited(t, nofile, "--tcp", "127.0.0.1:0")
	c := dial(t, socket)
	var st api.StatusResult
	call(t, c, api.Status, nil, &st)
	c.Close()
	return pid, socket, st.TCP
}

// serveLimited starts the daemon binary with args under a file descriptor
// limit (ulimit -n, soft and hard, which the Go runtime cannot raise) and
// returns its pid and socket.
func serveLimited(t *testing.T, nofile int, args ...string) (int, string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "run", "d.sock")
	cmd := exec.Command("sh", "-c", fmt.Sprintf("ulimit -n %d && exec %s serve --socket %s --data-dir %s --spool - --no-counters %s",
		nofile, bin, socket, filepath.Join(dir, "data"), strings.Join(args, " ")))
	log := &lockedLog{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", log)
		}
	})
	waitSocket(t, socket)
	return cmd.Process.Pid, socket
}

// lockedLog collects a daemon's output, safe to read while it writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// procStatus reads a field of /proc/PID/status in KiB.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func openFDs(pid int) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(fds)
}

// TestUnixServesThroughTCPFlood: 300 TCP connections that never say hello,
// against a daemon allowed 64 file descriptors, leave the owner's Unix
// socket answering (the campaign's 19,994 connections filled the
// descriptors and `vramscope status` failed).
func TestUnixServesThroughTCPFlood(t *testing.T) {
	pid, socket, addr := serveTCP(t, 64)
	base := openFDs(pid)
	var conns []net.Conn
	for i := 0; i < 300; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			break // the backlog is full: the daemon is not accepting
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(500 * time.Millisecond) // let the daemon accept what it will
	held := openFDs(pid) - base
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, "test")
	if err != nil {
		t.Fatalf("with %d TCP connections open (the daemon holds %d more descriptors): %v", len(conns), held, err)
	}
	defer c.Close()
	if err := c.Call(ctx, api.Status, nil, &api.StatusResult{}); err != nil {
		t.Fatalf("status with %d TCP connections open (the daemon holds %d more descriptors): %v", len(conns), held, err)
	}
	t.Logf("%d TCP connections without hello; the daemon holds %d descriptors more than before", len(conns), held)
}

// TestUnauthenticatedPeerCost: 8 peers without the token each send a 64 MiB
// message with a newline every 3 bytes (the campaign's 8 x 150 MB killed
// the daemon; one 60 MB message took it to 2.2 GB). The daemon's peak
// resident memory may grow by at most 32 MiB, and every peer is cut off.
func TestUnauthenticatedPeerCost(t *testing.T) {
	pid, _, addr := serveTCP(t, 1024)
	before := procStatus(t, pid, "VmHWM")
	msg := flood(t, 64<<20)
	var wg sync.WaitGroup
	sent := make([]int, 8)
	start := time.Now()
	for i := range sent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			go func() { // read the daemon's answer, so it never waits on us
				bufio.NewReader(c).ReadString(0)
			}()
			c.SetWriteDeadline(time.Now().Add(time.Minute))
			sent[i], _ = c.Write(msg)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	after := procStatus(t, pid, "VmHWM")
	t.Logf("VmHWM %d KiB before, %d KiB after 8 x %d-byte messages without hello (written before the cut: %v; %s)", before, after, len(msg), sent, took)
	if grew := (after - before) << 10; grew > 32<<20 {
		t.Errorf("the daemon's peak memory grew by %d MiB", grew>>20)
	}
	for i, n := range sent {
		if n == len(msg) {
			t.Errorf("peer %d could send all %d bytes: the daemon read them", i, n)
		}
	}
}

// TestPendingPeersCost: the most peers without the token can hold at once,
// with the default limits: 40 connections from 5 addresses, each with a
// message of MaxHelloBytes-1 bytes that never ends. The daemon keeps at most
// 32 (8 a user: here all are one), costing at most 16 MiB of resident memory, and cuts every one off
// within HelloTimeout (5 s) and a second.
func TestPendingPeersCost(t *testing.T) {
	pid, _, addr := serveTCP(t, 1024)
	fds, rss := openFDs(pid), procStatus(t, pid, "VmRSS")
	partial := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.hello","params":{"pad":"`), strings.Repeat("x", api.MaxHelloBytes)...)
	partial = partial[:api.MaxHelloBytes-1]
	var conns []net.Conn
	start := time.Now()
	for i := 0; i < 40; i++ {
		c := dialFrom(t, fmt.Sprintf("127.0.0.%d", 1+i%5), addr)
		c.Write(partial)
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	heldFDs, heldRSS := openFDs(pid)-fds, procStatus(t, pid, "VmRSS")-rss
	if heldFDs > 32 || heldRSS > 16<<10 {
		t.Errorf("40 peers hold %d descriptors and %d KiB", heldFDs, heldRSS)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last time.Duration
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			io.Copy(io.Discard, c)
			mu.Lock()
			last = max(last, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if last > DefaultTCPLimits.HelloTimeout+time.Second {
		t.Errorf("the last peer was cut off after %s", last)
	}
	t.Logf("40 peers without the token: the daemon held %d descriptors and %d KiB more (VmRSS), and cut the last off after %s", heldFDs, heldRSS, last.Round(time.Millisecond))
}
