package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/daemon/transport"
	"github.com/vramscope/vramscope/profiler/analyze"
)

const fixtures = "../../shared/fixtures/snapshots/"

// testDaemon runs a daemon on a fresh socket and data dir until the test ends.
func testDaemon(t *testing.T, mod ...func(*Config)) (*Daemon, Config) {
	t.Helper()
	dir, err := os.MkdirTemp("", "vsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := Config{Socket: filepath.Join(dir, "run", "d.sock"), DataDir: filepath.Join(dir, "data"), Spool: filepath.Join(dir, "spool"), Interval: 50 * time.Millisecond,
		Logf: func(f string, a ...any) { t.Logf(f, a...) }}
	for _, m := range mod {
		m(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := d.Serve(ctx); err != nil {
			t.Errorf("serve: %v", err)
		}
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitSocket(t, d.cfg.Socket)
	// Serve opens the Unix socket first, then the TCP port: a test that dials
	// d.Addr() at once got "" on a loaded machine (TestBeforeHelloOneAnswer).
	for deadline := time.Now().Add(10 * time.Second); cfg.TCP != "" && d.Addr() == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no TCP listener on %s in 10 s", cfg.TCP)
		}
	}
	return d, d.cfg
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no daemon on %s", path)
}

func dial(t *testing.T, socket string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), socket, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func call(t *testing.T, c *client.Client, method string, params, result any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Call(ctx, method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

func importFixture(t *testing.T, c *client.Client, name string) api.SnapshotResult {
	t.Helper()
	var r api.SnapshotResult
	call(t, c, api.SnapshotImport, api.ImportParams{Path: mustAbs(fixtures + name)}, &r)
	return r
}

func TestEveryMethodHasAHandler(t *testing.T) {
	have := map[string]bool{}
	for _, n := range Handlers() {
		have[n] = true
	}
	for _, m := range api.Methods {
		served := m.Dir == api.ClientToDaemon || m.Dir == api.AgentToDaemon || m.Dir == api.AgentNotice || m.Dir == api.ClientNotice
		if served != have[m.Name] {
			t.Errorf("%s (%s): handler present = %v", m.Name, m.Dir, have[m.Name])
		}
		delete(have, m.Name)
	}
	for n := range have {
		t.Errorf("handler %s is not in api.Methods", n)
	}
}

func TestStatusWithoutDriver(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	var st api.StatusResult
	call(t, c, api.Status, nil, &st)
	if st.APIVersion != api.Version || st.PID != os.Getpid() || st.DataDir != cfg.DataDir {
		t.Errorf("status = %+v", st)
	}
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	if st.Counters.Available || !strings.Contains(strings.ToLower(st.Counters.Reason), "nvidia") {
		t.Errorf("counters without a driver: %+v, want unavailable with a reason naming NVIDIA", st.Counters)
	}
	var dev api.DevicesResult
	call(t, c, api.CountersDevices, nil, &dev)
	if dev.Status.Available {
		t.Errorf("devices: %+v", dev)
	}
}

func TestSocketPermissions(t *testing.T) {
	_, cfg := testDaemon(t)
	fi, err := os.Stat(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(cfg.Socket))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v, want 0700", di.Mode().Perm())
	}
	// A second daemon on the same socket is refused, and the first keeps it.
	_, _, err = transport.ListenUnix(cfg.Socket)
	if err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Errorf("second listen: %v", err)
	}
	dial(t, cfg.Socket)
}

// TestAnalysisThroughTheAPI imports real fixtures and checks every analysis
// method against the engine run directly on the same file.
func TestAnalysisThroughTheAPI(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	direct, err := analyze.Run(fixtures+"gpt2_train.pickle", analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := importFixture(t, c, "gpt2_train.pickle")
	b := importFixture(t, c, "llama_lora_gc.pickle")
	if a.Reason != "import" || a.Bytes == 0 || a.SHA256 == "" || !strings.HasPrefix(a.Path, cfg.DataDir) {
		t.Errorf("import result %+v", a)
	}
	var list api.ListResult
	call(t, c, api.SnapshotList, api.ListParams{}, &list)
	if len(list.Snapshots) != 2 || list.Snapshots[0].ID != b.ID {
		t.Fatalf("list = %+v, want b then a", list)
	}
	var sum analyze.Result
	call(t, c, api.AnalysisSummary, api.IDParams{ID: a.ID}, &sum)
	if sum.Peak.Bytes != direct.Peak.Bytes || len(sum.Sites) != len(direct.Sites) {
		t.Errorf("summary peak %d (%d sites), direct %d (%d sites)", sum.Peak.Bytes, len(sum.Sites), direct.Peak.Bytes, len(direct.Sites))
	}
	// Sites for one file, named by a local path in another tree.
	var sites api.SitesResult
	call(t, c, api.AnalysisSites, api.SitesParams{ID: a.ID, File: "/home/me/src/trainer/train_gpt2.py"}, &sites)
	if len(sites.Sites) == 0 {
		t.Fatal("no sites for train_gpt2.py")
	}
	var want int
	for _, s := range direct.Sites {
		if strings.HasSuffix(s.File, "/trainer/train_gpt2.py") {
			want++
		}
	}
	if len(sites.Sites) != want {
		t.Errorf("sites for train_gpt2.py: %d, want %d", len(sites.Sites), want)
	}
	var fl struct {
		Root struct {
			Value int64 `json:"v"`
		} `json:"root"`
	}
	call(t, c, api.AnalysisFlame, api.FlameParams{ID: a.ID}, &fl)
	if raw, _ := json.Marshal(direct.Flame(analyze.FlameOptions{})); !strings.Contains(string(raw), `"v":`) || fl.Root.Value == 0 {
		t.Errorf("flame root value %d", fl.Root.Value)
	}
	var tl analyze.Timeline
	call(t, c, api.AnalysisTimeline, api.TimelineParams{ID: a.ID, Device: direct.Devices[0].Device}, &tl)
	if len(tl.Points) != len(direct.Devices[0].Timeline.Points) {
		t.Errorf("timeline %d points, direct %d", len(tl.Points), len(direct.Devices[0].Timeline.Points))
	}
	var findings []analyze.Finding
	call(t, c, api.AnalysisFindings, api.IDParams{ID: a.ID}, &findings)
	if len(findings) != len(direct.Findings) {
		t.Errorf("findings %d, direct %d", len(findings), len(direct.Findings))
	}
	var diff analyze.Diff
	call(t, c, api.AnalysisDiff, api.DiffParams{A: a.ID, B: b.ID}, &diff)
	if diff.PeakA != direct.Peak.Bytes || diff.PeakB == 0 {
		t.Errorf("diff peaks %d -> %d", diff.PeakA, diff.PeakB)
	}
	call(t, c, api.SnapshotDelete, api.IDParams{ID: a.ID}, nil)
	err = c.Call(context.Background(), api.AnalysisSummary, api.IDParams{ID: a.ID}, nil)
	if client.Code(err) != api.CodeNotFound {
		t.Errorf("summary of a deleted snapshot: %v", err)
	}
}

// TestConcurrentClients: many clients at once, one decode per snapshot.
func TestConcurrentClients(t *testing.T) {
	d, cfg := testDaemon(t)
	setup := dial(t, cfg.Socket)
	a := importFixture(t, setup, "oom_batch.pickle")
	d.analyses.Drop(a.ID) // forget the import's analysis: the clients race to make it
	before := d.analyses.Runs()
	var wg sync.WaitGroup
	peaks := make([]int64, 12)
	for i := range peaks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(context.Background(), cfg.Socket, "test")
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			var tl analyze.Timeline
			if err := c.Call(context.Background(), api.AnalysisTimeline, api.TimelineParams{ID: a.ID}, &tl); err != nil {
				t.Error(err)
			}
			var r analyze.Result
			if err := c.Call(context.Background(), api.AnalysisSummary, api.IDParams{ID: a.ID}, &r); err != nil {
				t.Error(err)
			}
			peaks[i] = r.Peak.Bytes
			var l api.ListResult
			c.Call(context.Background(), api.SnapshotList, nil, &l)
		}()
	}
	wg.Wait()
	if runs := d.analyses.Runs() - before; runs != 1 {
		t.Errorf("%d decodes for one snapshot and %d clients, want 1", runs, len(peaks))
	}
	for _, p := range peaks {
		if p != peaks[0] || p == 0 {
			t.Fatalf("peaks differ: %v", peaks)
		}
	}
}

// TestGarbageAndPanics: a client sending garbage is dropped, a handler that
// panics answers an error, and the daemon serves the next client either way.
func TestGarbageAndPanics(t *testing.T) {
	handlers["test.panic"] = raw(func(*session, context.Context, json.RawMessage) (any, error) { panic("boom") })
	defer delete(handlers, "test.panic")
	_, cfg := testDaemon(t)
	for _, junk := range []string{"garbage\n", "{\"jsonrpc\":\"2.0\",\"method\":12}\n", "[[[[[[\n", "\x00\xff\xfe\n"} {
		raw, err := net.Dial("unix", cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		raw.Write([]byte(junk))
		// An error answer comes at once (TestMalformedMessagesAnswered checks
		// them); "[[[[[[" is a message not finished yet, so the daemon waits.
		raw.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		bufio.NewReader(raw).ReadString('\n')
		raw.Close()
	}
	c := dial(t, cfg.Socket)
	err := c.Call(context.Background(), "test.panic", nil, nil)
	if client.Code(err) != api.CodeInternal || !strings.Contains(err.Error(), "boom") {
		t.Errorf("panic answer: %v", err)
	}
	err = c.Call(context.Background(), "no.such.method", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown method") {
		t.Errorf("unknown method: %v", err)
	}
	err = c.Call(context.Background(), api.SnapshotGet, json.RawMessage(`{"id": 12}`), nil)
	if client.Code(err) != api.CodeInvalidParams {
		t.Errorf("bad params: %v", err)
	}
	var st api.StatusResult
	call(t, c, api.Status, nil, &st)
}

func TestNotifications(t *testing.T) {
	_, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	got := make(chan string, 16)
	sub.Notify = func(method string, _ json.RawMessage) { got <- method }
	call(t, sub, api.Subscribe, api.SubscribeParams{}, nil)
	c := dial(t, cfg.Socket)
	importFixture(t, c, "gpt2_train.pickle")
	ag := fakeAgent(t, cfg.Socket, 4242, nil)
	ag.Close()
	var seen []string
	timeout := time.After(10 * time.Second)
	for len(seen) < 3 {
		select {
		case m := <-got:
			seen = append(seen, m)
		case <-timeout:
			t.Fatalf("notifications: %v", seen)
		}
	}
	sort.Strings(seen)
	want := []string{api.EventAgentConnected, api.EventAgentGone, api.EventSnapshotStored}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("notifications %v, want %v", seen, want)
	}
	err := sub.Call(context.Background(), api.Subscribe, api.SubscribeParams{Topics: []string{"nope"}}, nil)
	if client.Code(err) != api.CodeInvalidParams {
		t.Errorf("unknown topic: %v", err)
	}
}

func TestTCPNeedsToken(t *testing.T) {
	d, cfg := testDaemon(t, func(c *Config) { c.TCP = "127.0.0.1:0" })
	addr := d.Addr()
	if addr == "" {
		t.Fatal("no TCP listener")
	}
	tok, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(cfg.TokenFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode().Perm())
	}
	if _, err := client.DialTCP(context.Background(), addr, "wrong", "test"); client.Code(err) != api.CodeUnauthorized {
		t.Errorf("wrong token: %v", err)
	}
	// Skipping hello is refused too, and the connection is closed.
	raw, _ := net.Dial("tcp", addr)
	raw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"snapshot.list"}` + "\n"))
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(raw).ReadString('\n')
	if !strings.Contains(line, "-32001") {
		t.Errorf("request before hello on TCP: %q", line)
	}
	raw.Close()
	c, err := client.DialTCP(context.Background(), addr, strings.TrimSpace(string(tok)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call(t, c, api.SnapshotList, nil, &api.ListResult{})
	for _, bad := range []string{"0.0.0.0:0", "192.0.2.1:7425", "example.com:1"} {
		if _, err := transport.ListenTCP(bad); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("transport.ListenTCP(%s): %v", bad, err)
		}
	}
}

func TestSameFile(t *testing.T) {
	for _, tc := range []struct {
		rec, want string
		ok        bool
	}{
		{"/workspace/trainer/train_gpt2.py", "/home/me/trainer/train_gpt2.py", true},
		{"/workspace/trainer/train_gpt2.py", "/workspace/trainer/train_gpt2.py", true},
		{"/workspace/trainer/train_gpt2.py", "/home/me/other/train_gpt2.py", false},
		{"/workspace/trainer/train_gpt2.py", "train_gpt2.py", true},
		{"/a/b.py", "", false},
	} {
		if got := sameFile(tc.rec, tc.want); got != tc.ok {
			t.Errorf("sameFile(%q, %q) = %v", tc.rec, tc.want, got)
		}
	}
}

// analysis.whatif fits stored snapshots as the CLI fits files.
func TestWhatIfThroughTheAPI(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	dir := filepath.Join("..", "examples", "snapshots", "whatif")
	var snaps []api.WhatIfSnapshot
	var pts []analyze.WhatIfPoint
	for _, b := range []float64{2, 4, 8} {
		path := filepath.Join(dir, fmt.Sprintf("whatif_bs%d.pickle", int(b)))
		var r api.SnapshotResult
		call(t, c, api.SnapshotImport, api.ImportParams{Path: mustAbs(path)}, &r)
		snaps = append(snaps, api.WhatIfSnapshot{ID: r.ID, Size: b})
		res, err := analyze.Run(path, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pts = append(pts, analyze.WhatIfPointOf(res, b))
	}
	want, err := analyze.FitWhatIf(pts, analyze.WhatIfOptions{DeviceMemory: 80 << 30, Overhead: 1 << 30, Predict: []float64{12}})
	if err != nil {
		t.Fatal(err)
	}
	var got analyze.WhatIf
	call(t, c, api.AnalysisWhatIf, api.WhatIfParams{Snapshots: snaps, DeviceMemory: 80 << 30, Predict: []float64{12}}, &got)
	if got.MaxSize != want.MaxSize || got.MaxSize <= 8 || len(got.Predictions) != 1 ||
		got.Predictions[0].Allocated != want.Predictions[0].Allocated {
		t.Errorf("daemon: max %d, predictions %+v; direct: max %d, %+v", got.MaxSize, got.Predictions, want.MaxSize, want.Predictions)
	}
	err = c.Call(context.Background(), api.AnalysisWhatIf, api.WhatIfParams{Snapshots: snaps[:1]}, nil)
	if client.Code(err) != api.CodeInvalidParams {
		t.Errorf("one snapshot: %v", err)
	}
	snaps[1].Size = snaps[0].Size
	err = c.Call(context.Background(), api.AnalysisWhatIf, api.WhatIfParams{Snapshots: snaps}, nil)
	if client.Code(err) != api.CodeInvalidParams || !strings.Contains(err.Error(), "same size") {
		t.Errorf("two snapshots of one size: %v", err)
	}
}
