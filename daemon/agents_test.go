package daemon

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// fakeAgent registers as process pid over the real socket and answers
// agent.dump with dump (nil: copy the gpt2_train fixture).
func fakeAgent(t *testing.T, socket string, pid int, dump func(conn *jsonrpc2.Conn, path string) (any, error)) *jsonrpc2.Conn {
	t.Helper()
	if dump == nil {
		dump = func(_ *jsonrpc2.Conn, path string) (any, error) { return copyDump(fixtures+"gpt2_train.pickle", path) }
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonrpc2.HandlerWithError(func(_ context.Context, conn *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		if r.Method != api.AgentDump {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: r.Method}
		}
		var p api.DumpParams
		json.Unmarshal(*r.Params, &p)
		return dump(conn, p.Path)
	})
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(h), jsonrpc2.SetLogger(discard{}))
	t.Cleanup(func() { conn.Close() })
	var res api.RegisterResult
	err = conn.Call(context.Background(), api.AgentRegister, api.RegisterParams{PID: pid, Host: "test", Argv: []string{"python", "train.py"},
		WorldSize: 1, Recording: true, MaxEntries: 100000, APIVersion: api.Version}, &res)
	if err != nil || res.IncomingDir == "" {
		t.Fatalf("register: %v %+v", err, res)
	}
	return conn
}

func copyDump(src, path string) (api.DumpResult, error) {
	if err := copyFile(src, path); err != nil {
		return api.DumpResult{}, err
	}
	fi, _ := os.Stat(path)
	return api.DumpResult{Path: path, Bytes: fi.Size(), Entries: 9133, TookMS: 1}, nil
}

func TestTakeSnapshotThroughAgent(t *testing.T) {
	d, cfg := testDaemon(t)
	fakeAgent(t, cfg.Socket, 1111, nil)
	c := dial(t, cfg.Socket)
	var ps api.ProcessListResult
	call(t, c, api.ProcessList, nil, &ps)
	if len(ps.Processes) != 1 || ps.Processes[0].PID != 1111 || !ps.Processes[0].Agent || ps.Processes[0].Argv[1] != "train.py" {
		t.Fatalf("process.list = %+v", ps)
	}
	var snap api.SnapshotResult
	call(t, c, api.SnapshotTake, api.TakeParams{PID: 1111, Label: "after step 3", Analyze: true}, &snap)
	if snap.PID != 1111 || snap.Reason != "request" || snap.Label != "after step 3" || snap.Source != "train.py" {
		t.Errorf("take = %+v", snap)
	}
	if !d.analyses.Cached(snap.ID) {
		t.Error("the analysis is not ready when snapshot.take returns")
	}
	if err := d.store.Verify(snap.ID); err != nil {
		t.Error(err)
	}
	err := c.Call(context.Background(), api.SnapshotTake, api.TakeParams{PID: 99999}, nil)
	if client.Code(err) != api.CodeNoAgent {
		t.Errorf("take from a process without agent: %v", err)
	}
}

// TestAgentDiesMidDump: the agent writes half a file and its connection
// drops; the caller gets an error, nothing is listed, nothing is left over.
func TestAgentDiesMidDump(t *testing.T) {
	d, cfg := testDaemon(t)
	fakeAgent(t, cfg.Socket, 2222, func(conn *jsonrpc2.Conn, path string) (any, error) {
		b, _ := os.ReadFile(fixtures + "gpt2_train.pickle")
		os.WriteFile(path, b[:len(b)/2], 0o600)
		conn.Close()
		return nil, nil
	})
	c := dial(t, cfg.Socket)
	err := c.Call(context.Background(), api.SnapshotTake, api.TakeParams{PID: 2222}, nil)
	if client.Code(err) != api.CodeAgentFailed {
		t.Fatalf("take from a dying agent: %v", err)
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots listed", n)
	}
	if left, _ := os.ReadDir(d.store.IncomingDir()); len(left) != 0 {
		t.Errorf("incoming keeps %v", left)
	}
	deadline := time.Now().Add(5 * time.Second)
	for d.agents.get(2222) != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if d.agents.get(2222) != nil {
		t.Error("the dead agent is still registered")
	}
}

func TestAgentTimeoutAndBadDump(t *testing.T) {
	d, cfg := testDaemon(t)
	fakeAgent(t, cfg.Socket, 3333, func(_ *jsonrpc2.Conn, path string) (any, error) {
		time.Sleep(2 * time.Second)
		return nil, nil
	})
	fakeAgent(t, cfg.Socket, 4444, func(_ *jsonrpc2.Conn, path string) (any, error) {
		os.WriteFile(path, []byte("\x80\x04not really"), 0o600)
		return api.DumpResult{Path: path, Bytes: 12}, nil
	})
	fakeAgent(t, cfg.Socket, 5555, func(_ *jsonrpc2.Conn, path string) (any, error) {
		return nil, &jsonrpc2.Error{Code: 1, Message: "CUDA is not available"}
	})
	c := dial(t, cfg.Socket)
	err := c.Call(context.Background(), api.SnapshotTake, api.TakeParams{PID: 3333, TimeoutMS: 200}, nil)
	if client.Code(err) != api.CodeAgentFailed || !strings.Contains(err.Error(), "within") {
		t.Errorf("slow agent: %v", err)
	}
	err = c.Call(context.Background(), api.SnapshotTake, api.TakeParams{PID: 4444}, nil)
	if client.Code(err) != api.CodeBadSnapshot {
		t.Errorf("bad dump: %v", err)
	}
	err = c.Call(context.Background(), api.SnapshotTake, api.TakeParams{PID: 5555}, nil)
	if client.Code(err) != api.CodeAgentFailed || !strings.Contains(err.Error(), "CUDA is not available") {
		t.Errorf("agent error: %v", err)
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots listed", n)
	}
}

func TestCapturedOOM(t *testing.T) {
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	got := make(chan json.RawMessage, 4)
	sub.Notify = func(method string, p json.RawMessage) {
		if method == api.EventOOMCaptured {
			got <- p
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"oom_captured"}}, nil)
	ag := fakeAgent(t, cfg.Socket, 6666, nil)
	part := filepath.Join(d.store.IncomingDir(), "6666-oom.part")
	if err := copyFile(fixtures+"oom_batch.pickle", part); err != nil {
		t.Fatal(err)
	}
	var res api.SnapshotResult
	err := ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: part},
		Reason: "oom", OOM: &api.OOMRaw{Requested: 1 << 30}}, &res)
	if err != nil || res.Reason != "oom" || res.PID != 6666 {
		t.Fatalf("captured: %v %+v", err, res)
	}
	select {
	case p := <-got:
		var ev api.OOMEvent
		json.Unmarshal(p, &ev)
		if ev.Snapshot.ID != res.ID || ev.OOM.Requested != 1<<30 {
			t.Errorf("oom event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no oom_captured notification")
	}
	// A path outside the incoming dir is refused.
	err = ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: fixtures + "oom_batch.pickle"}, Reason: "oom"}, &res)
	if err == nil || !strings.Contains(err.Error(), "incoming") {
		t.Errorf("captured outside incoming: %v", err)
	}
}

// TestCapturedOOMInGeneration: the oom_captured event of an OOM in
// generation carries what the finding says of the KV cache (snaptool.py's
// kv_oom: batch 8 x 100 tokens, 2 KiB a token) and the batch and length
// that fit, in its fix and as numbers.
func TestCapturedOOMInGeneration(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		reftool.Missing(t, "no python3")
	}
	ev := capturedOOMEvent(t, func(part string) {
		if out, err := exec.Command(py, "../profiler/analyze/testdata/snaptool.py", "synth", "kv_oom", part).CombinedOutput(); err != nil {
			t.Fatalf("snaptool: %v %s", err, out)
		}
	})
	kv := ev.KVCache
	if kv == nil || kv.Batch != 8 || kv.Tokens != 100 || kv.BytesPerToken != 2048 || kv.MaxBatch <= 0 || kv.MaxTokens <= 0 {
		t.Fatalf("kv_cache %+v", kv)
	}
	want := fmt.Sprintf("at 100 tokens a batch of %d fits, and at batch 8, %d tokens", kv.MaxBatch, kv.MaxTokens)
	if !strings.Contains(ev.Fix, want) || !strings.Contains(ev.Title, "batch 8 x 100 tokens, 2.00 KiB a token") {
		t.Errorf("title %q fix %q", ev.Title, ev.Fix)
	}
}

// TestCapturedRealOOMInGeneration: the agent's capture of batch generate()
// out of a 3 GiB cap on the H200 (GPT-2 medium, batch 32 x 512 tokens,
// examples/snapshots/inference/gen_oom.pickle.gz) handed over as the agent
// hands it: the event says what the cache held and a batch below the one that failed.
func TestCapturedRealOOMInGeneration(t *testing.T) {
	ev := capturedOOMEvent(t, func(part string) {
		in, err := os.Open("../examples/snapshots/inference/gen_oom.pickle.gz")
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		zr, err := gzip.NewReader(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(part)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := io.Copy(out, zr); err != nil {
			t.Fatal(err)
		}
	})
	kv := ev.KVCache
	if kv == nil || kv.Batch != 32 || kv.Tokens != 512 || kv.BytesPerToken != 96<<10 || kv.MaxBatch >= 32 || kv.MaxBatch < 16 {
		t.Fatalf("kv_cache %+v", kv)
	}
	if !strings.Contains(ev.Title, "batch 32 x 512 tokens, 96.00 KiB a token") {
		t.Errorf("title %q", ev.Title)
	}
}

// capturedOOMEvent hands the daemon an OOM capture that write makes, as a fake
// agent, and returns the oom_captured event a subscriber gets.
func capturedOOMEvent(t *testing.T, write func(part string)) api.OOMEvent {
	t.Helper()
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	got := make(chan json.RawMessage, 4)
	sub.Notify = func(method string, p json.RawMessage) {
		if method == api.EventOOMCaptured {
			got <- p
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"oom_captured"}}, nil)
	ag := fakeAgent(t, cfg.Socket, 6667, nil)
	part := filepath.Join(d.store.IncomingDir(), "6667-oom.part")
	write(part)
	var res api.SnapshotResult
	if err := ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: part},
		Reason: "oom"}, &res); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		var ev api.OOMEvent
		if err := json.Unmarshal(p, &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no oom_captured notification")
	}
	return api.OOMEvent{}
}

// TestPythonAgent runs the real Python agent (jupyter/vramscope) in a child
// process against the daemon: it registers, and snapshot.take gets a stored,
// analysed snapshot through it (the snapshot is the test hook's file: this
// machine has no GPU; the GPU run is make gpu-e2e).
func TestPythonAgent(t *testing.T) {
	d, cfg := testDaemon(t)
	cmd := startPython(t, "import time, vramscope\nvramscope.attach()\nfor _ in range(600):\n    time.sleep(0.05)\n",
		[]string{"PYTHONPATH=" + mustAbs("../jupyter"), "VRAMSCOPE_SOCKET=" + cfg.Socket,
			"VRAMSCOPE_TEST_SNAPSHOT=" + mustAbs(fixtures+"gpt2_train.pickle"), "RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2"})
	pid := cmd.Process.Pid
	waitAgent(t, d, pid, false)
	p := d.agents.get(pid).process()
	if p.Rank != 1 || p.WorldSize != 2 || p.LocalRank != 1 || !strings.Contains(strings.Join(p.Argv, " "), "train.py") || p.Note == "" {
		t.Errorf("registered as %+v", p)
	}
	c := dial(t, cfg.Socket)
	var snap api.SnapshotResult
	call(t, c, api.SnapshotTake, api.TakeParams{PID: pid, Analyze: true}, &snap)
	if snap.Bytes == 0 || snap.Rank != 1 || !d.analyses.Cached(snap.ID) {
		t.Errorf("snapshot %+v", snap)
	}
	// The agent goes away with its process.
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for d.agents.get(pid) != nil {
		if time.Now().After(deadline) {
			t.Fatal("a killed agent stays registered")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startPython runs script with python3 (the test is skipped without one) and
// the extra environment; the process is killed, and its output logged, when
// the test ends.
func startPython(t *testing.T, script string, env []string) *exec.Cmd {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		reftool.Missing(t, "no python3")
	}
	path := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, path)
	cmd.Env = append(os.Environ(), env...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); t.Logf("agent output:\n%s", out) })
	return cmd
}

// waitAgent waits until pid's agent registered (with its CUDA device known,
// when cuda).
func waitAgent(t *testing.T, d *Daemon, pid int, cuda bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for a := d.agents.get(pid); a == nil || (cuda && a.process().Device < 0); a = d.agents.get(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the Python agent %d did not register (cuda %v)", pid, cuda)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// A Python agent with a snapshot dict (the test torch hands over a fixture's
// contents) streams it as VSM1 through the FIFO: the daemon stores it and its
// analysis is the pickle's.
func TestPythonAgentStreams(t *testing.T) {
	d, cfg := testDaemon(t)
	fixture := mustAbs(fixtures + "gpt2_train.pickle")
	cmd := startPython(t, "import time, torch, vramscope\nvramscope.attach()\ntorch.cuda.init()\nfor _ in range(600):\n    time.sleep(0.05)\n",
		[]string{"PYTHONPATH=" + mustAbs("../jupyter") + string(os.PathListSeparator) + mustAbs("../jupyter/tests/faketorch"),
			"VRAMSCOPE_SOCKET=" + cfg.Socket, "FAKE_TORCH_SNAPSHOT=" + fixture})
	pid := cmd.Process.Pid
	waitAgent(t, d, pid, true)
	c := dial(t, cfg.Socket)
	var snap api.SnapshotResult
	call(t, c, api.SnapshotTake, api.TakeParams{PID: pid, Analyze: true}, &snap)
	if snap.Format != "vsm1" || snap.Entries <= 0 || !d.analyses.Cached(snap.ID) {
		t.Fatalf("snapshot %+v", snap)
	}
	// The agent says where its time went; the phases fit inside its total.
	ph := snap.Phases
	if ph.Snapshot <= 0 || ph.Write <= 0 || ph.Open < 0 || ph.Finish < 0 ||
		ph.Wait+ph.Snapshot+ph.Open+ph.Write > snap.TookMS+1 {
		t.Errorf("phases %+v against took_ms %.3f", ph, snap.TookMS)
	}
	head := make([]byte, 4)
	if f, err := os.Open(snap.Path); err != nil {
		t.Fatal(err)
	} else {
		f.Read(head)
		f.Close()
	}
	if string(head) != "VSM1" {
		t.Errorf("stored file starts %q", head)
	}
	direct, err := analyze.Run(fixture, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sum analyze.Result
	call(t, c, api.AnalysisSummary, api.IDParams{ID: snap.ID}, &sum)
	if sum.Peak != direct.Peak || len(sum.Sites) != len(direct.Sites) || sum.Events != direct.Events {
		t.Errorf("streamed analysis: peak %+v, %d sites, %d events; the pickle's: %+v, %d, %d",
			sum.Peak, len(sum.Sites), sum.Events, direct.Peak, len(direct.Sites), direct.Events)
	}
	// The stored file reads back to the same analysis, and the store verifies it.
	again, err := analyze.Run(snap.Path, analyze.Options{})
	if err != nil || again.Peak != direct.Peak {
		t.Errorf("stored VSM1 file: %v, peak %+v", err, again)
	}
	left, _ := os.ReadDir(d.store.IncomingDir())
	for _, e := range left {
		t.Errorf("left in incoming: %s", e.Name())
	}
}
