package daemon

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/kube"
)

// testPods gives the fake agents' pids pods (the cgroup a kubelet's
// containerd would make); other pids run in none.
var testPods = map[int]kube.Ref{
	4101: {PodUID: "0d5e3f5a-1c2b-4f3e-9a8b-7c6d5e4f3a2b", ContainerID: "3c7e1f0d9b2a48c6e5f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9"},
	4102: {PodUID: "0d5e3f5a-1c2b-4f3e-9a8b-7c6d5e4f3a2b", ContainerID: "3c7e1f0d9b2a48c6e5f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9"},
}

func withPods(c *Config) {
	c.Kube.ReadCgroup = func(pid int) (kube.Ref, error) { return testPods[pid], nil }
}

func withExport(c *Config) { c.Export.Addr = "127.0.0.1:0" }

// torch sends an agent's once-a-second torch counters.
func torch(t *testing.T, ag *jsonrpc2.Conn, alloc, reserved, peak int64) {
	t.Helper()
	if err := ag.Notify(context.Background(), api.AgentTorch, api.TorchParams{Allocated: alloc, Reserved: reserved, MaxAlloc: peak}); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond every 50 ms until it holds or the time is up.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, d, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExportLoopbackOnly: a daemon asked for a non-loopback metrics address
// without --metrics-public refuses to serve (export.Listen's rule; its own
// test has the cases).
func TestExportLoopbackOnly(t *testing.T) {
	// New does not listen; Serve refuses, and closes the daemon.
	d, err := New(Config{Socket: filepath.Join(t.TempDir(), "s"), DataDir: t.TempDir(), NoCounters: true, Export: Export{Addr: "0.0.0.0:0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("serve on 0.0.0.0: %v", err)
	}
}

// TestMetricsScrape reads /metrics as Prometheus would (without NVML here:
// prom_test.go has the GPUs): the agents' series with their pods, the
// counters, and nothing that carries a command line or a path.
func TestMetricsScrape(t *testing.T) {
	d, cfg := testDaemon(t, withExport, withPods)
	ag := fakeAgent(t, cfg.Socket, 4101, nil)
	fakeAgent(t, cfg.Socket, 4200, nil)
	torch(t, ag, 3<<30, 4<<30, 5<<30)
	base := "http://" + d.ExportAddr()
	waitFor(t, 10*time.Second, "agent 4101's torch counters", func() (bool, string) {
		_, body := httpGet(t, base+"/metrics")
		return strings.Contains(body, `vramscope_process_torch_peak_allocated_bytes{container="",device="0",namespace="",pid="4101",pod="",pod_uid="0d5e3f5a-1c2b-4f3e-9a8b-7c6d5e4f3a2b",rank="0"} 5.36870912e+09`), body
	})
	c := dial(t, cfg.Socket)
	call(t, c, api.SnapshotTake, api.TakeParams{PID: 4101, Analyze: true}, nil)
	code, body := httpGet(t, base+"/metrics")
	for _, want := range []string{
		"# HELP vramscope_process_torch_allocated_bytes ", "# TYPE vramscope_snapshots_stored_total counter",
		`vramscope_snapshots_stored_total{reason="request"} 1`, `vramscope_snapshots_stored_total{reason="oom"} 0`,
		"vramscope_ooms_captured_total 0", `vramscope_findings_total{kind="leak"} 0`, "vramscope_agents 2",
		"vramscope_store_snapshots 1", "vramscope_counters_available 1",
		`vramscope_process_world_size{container="",device="0",namespace="",pid="4200",pod="",pod_uid="",rank="0"} 1`,
		`vramscope_process_recording{container="",device="0",namespace="",pid="4101",`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	noPathsOrArgv(t, body, cfg)
	ag.Close()
	waitFor(t, 10*time.Second, "agent 4101's series gone", func() (bool, string) {
		_, body := httpGet(t, base+"/metrics")
		return !strings.Contains(body, `pid="4101"`) && strings.Contains(body, `pid="4200"`), body
	})
}

// noPathsOrArgv checks that no label of the exposition carries a path or
// the agents' command line ("python train.py").
func noPathsOrArgv(t *testing.T, exposition string, cfg Config) {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		labels, _, _ := strings.Cut(line, "} ")
		for _, bad := range []string{"/", "train.py", "python", cfg.DataDir, cfg.Socket} {
			if strings.Contains(labels, bad) {
				t.Errorf("a label carries %q: %s", bad, line)
			}
		}
	}
}

// TestPprofEndpoint: go tool pprof reads the latest snapshot of a live
// daemon by pid, rank and pod.
func TestPprofEndpoint(t *testing.T) {
	d, cfg := testDaemon(t, withExport, withPods)
	fakeAgent(t, cfg.Socket, 4101, nil)
	base := "http://" + d.ExportAddr() + "/debug/pprof/gpu_memory"
	if code, body := httpGet(t, base+"?pid=4101"); code != 404 || !strings.Contains(body, `pid="4101"`) {
		t.Errorf("before any snapshot: %d %s", code, body)
	}
	c := dial(t, cfg.Socket)
	var snap api.SnapshotResult
	call(t, c, api.SnapshotTake, api.TakeParams{PID: 4101}, &snap)
	if snap.PodUID != testPods[4101].PodUID {
		t.Errorf("snapshot metadata %+v lacks the pod", snap.Snapshot)
	}
	if code, body := httpGet(t, base+"?pid=x"); code != 400 || !strings.Contains(body, "integer") {
		t.Errorf("pid=x: %d %s", code, body)
	}
	if code, _ := httpGet(t, base+"?pid=4101&rank=3"); code != 404 {
		t.Errorf("rank 3: %d", code)
	}
	gotool, err := exec.LookPath("go") // the go tool that runs this test
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"?pid=4101", "?rank=0", "?pod=" + testPods[4101].PodUID, ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // the first run may build the pprof tool
		cmd := exec.CommandContext(ctx, gotool, "tool", "pprof", "-top", "-nodecount=5", base+q)
		cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir()) // where pprof saves what it fetched
		out, err := cmd.CombinedOutput()
		cancel()
		text := string(out)
		if err != nil || !strings.Contains(text, "Type: inuse_space") || !strings.Contains(text, "Showing nodes") ||
			!strings.Contains(text, "snapshot "+snap.ID) {
			t.Errorf("go tool pprof -top %s%s: %v\n%s", base, q, err, text)
		}
	}
}
