package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/daemon/transport"
)

// TestOwnerServedThroughMetricsFlood: another user opens 600 keep-alive
// connections to the metrics port of a daemon allowed 128 file descriptors
// (the campaign's took all 20,000 of 20,000, and the owner's status, imports
// and hand-overs timed out). The owner's status and import on the Unix
// socket still work, the daemon holds fewer descriptors than its limit, and
// a scraper still gets its metrics.
func TestOwnerServedThroughMetricsFlood(t *testing.T) {
	if os.Getenv("VRAMSCOPE_HELPER_FLOOD") != "" {
		return
	}
	const nofile = 128
	addr := freeLoopbackAddr(t)
	pid, socket := serveLimited(t, nofile, "--metrics", addr)
	waitFor(t, 10*time.Second, "the metrics listener", func() (bool, string) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil, fmt.Sprint(err)
	})
	flood := startHelper(t, "TestHelperMetricsFlood", "VRAMSCOPE_HELPER_FLOOD="+addr+",600")
	defer flood.stop()
	held := openFDs(pid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, "test")
	if err != nil {
		t.Fatalf("the owner's socket, with %s: %v", flood.said, err)
	}
	defer c.Close()
	if err := c.Call(ctx, api.Status, nil, &api.StatusResult{}); err != nil {
		t.Fatalf("status with %s: %v", flood.said, err)
	}
	var r api.SnapshotResult
	if err := c.Call(ctx, api.SnapshotImport, api.ImportParams{Path: mustAbs("../examples/snapshots/leak_steps.pickle")}, &r); err != nil {
		t.Fatalf("import with %s: %v", flood.said, err)
	}
	if held >= nofile-transport.MinOwnerReserve {
		t.Errorf("the daemon holds %d descriptors of %d", held, nofile)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("a scrape with %s: %v", flood.said, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "vramscope_store_snapshots 1") {
		t.Errorf("the scrape: %d %.200s", resp.StatusCode, body)
	}
	t.Logf("%s; the daemon held %d descriptors of %d; status, import and a scrape answered", flood.said, held, nofile)
}

// freeLoopbackAddr is a loopback address with a port nobody listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// flooder is the process holding the connections, and what it said once
// they were open.
type flooder struct {
	cmd  *exec.Cmd
	in   io.Closer
	said string
}

// startHelper runs the test helper as uid 65534 when the tests run as root
// (else as this user) with env, and waits until it says "flood: ...".
func startHelper(t *testing.T, helper string, env ...string) *flooder {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^"+helper+"$")
	if os.Getuid() == 0 {
		exe = filepath.Join(t.TempDir(), "helper.test")
		if err := copyFile(os.Args[0], exe); err != nil {
			t.Fatal(err)
		}
		for p := exe; p != "/"; p = filepath.Dir(p) {
			os.Chmod(p, 0o755)
		}
		cmd = exec.Command(exe, "-test.run=^"+helper+"$")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Env = env
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &flooder{cmd: cmd, in: in}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "flood: "); ok {
			f.said = s
			return f
		}
	}
	f.stop()
	t.Fatalf("the flooder said nothing")
	return nil
}

func (f *flooder) stop() {
	f.in.Close()
	f.cmd.Process.Kill()
	f.cmd.Wait()
}

// TestHelperMetricsFlood is the child of TestOwnerServedThroughMetricsFlood:
// it opens n connections to the metrics port, asks for /metrics on each and
// keeps it open (keep-alive), says how many it opened and holds them until
// its stdin closes (at most a minute).
func TestHelperMetricsFlood(t *testing.T) {
	spec := os.Getenv("VRAMSCOPE_HELPER_FLOOD")
	if spec == "" {
		t.Skip("helper process only")
	}
	addr, ns, _ := strings.Cut(spec, ",")
	n, _ := strconv.Atoi(ns)
	var conns []net.Conn
	answered := 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered++
		}
	}
	fmt.Printf("flood: uid %d opened %d keep-alive connections to the metrics port (%d answered)\n", os.Getuid(), len(conns), answered)
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
	for _, c := range conns {
		c.Close()
	}
}
