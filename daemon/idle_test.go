package daemon

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// TestIdleReport drives the join through a real daemon: an agent on the
// simulated H200's GPU 0 (utilisation 0%) sends 3 s of stack samples in one
// agent.stacks batch, its training thread in a DataLoader transform; once
// NVML has read GPU 0 across them, idle.report, process.list and the
// Prometheus state name the transform's line, and so does the gpu_idle
// finding of a snapshot taken then. Samples naming no thread of
// their batch are dropped, frame indexes outside it end the stack.
func TestIdleReport(t *testing.T) {
	smp := simulatedH200(t)
	d, cfg := testDaemon(t, func(c *Config) { c.Sampler = smp })
	c, err := net.Dial("unix", cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	agent := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(jsonrpc2.HandlerWithError(
		func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
			var p api.DumpParams
			json.Unmarshal(*r.Params, &p)
			return copyDump(fixtures+"gpt2_train.pickle", p.Path)
		})), jsonrpc2.SetLogger(discard{}))
	t.Cleanup(func() { agent.Close() })
	var reg api.RegisterResult
	if err := agent.Call(context.Background(), api.AgentRegister, api.RegisterParams{PID: 4101, Host: "test", Argv: []string{"python", "train.py"},
		Device: 0, DeviceUUID: smp.Devices()[0].UUID, APIVersion: api.Version}, &reg); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UnixMilli()
	batch := api.StacksParams{PeriodMS: 40, CostMS: 2.5,
		Threads: []api.StackThread{{Name: "MainThread", Main: true}},
		Frames:  []api.StackFrame{{File: "/w/data.py", Line: 12, Func: "jitter"}, {File: "/w/train.py", Line: 40, Func: "main"}}}
	for k := range 75 {
		batch.Samples = append(batch.Samples, api.StackSample{TimeMS: t0 + 40*int64(k), Thread: 0, Stack: []int{0, 1, 7}, Wait: "dataloader"})
	}
	batch.Samples = append(batch.Samples, api.StackSample{TimeMS: t0 + 100, Thread: 3, Stack: []int{1}})
	if err := agent.Notify(context.Background(), api.AgentStacks, batch); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, cfg.Socket)
	var r api.IdleResult
	for deadline := time.Now().Add(15 * time.Second); r.WallMS < 1000; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no utilisation window across the samples in 15 s: %+v", r)
		}
		cl.Call(context.Background(), api.IdleReport, api.IdleParams{PID: 4101, Raw: true}, &r) // not found until the batch is in
	}
	if r.IdleShare != 1 || !strings.HasPrefix(r.Headline, "GPU idle 100% of ") || !strings.HasSuffix(r.Headline, ": waiting for the data loader at /w/data.py:12 (100%)") {
		t.Errorf("idle %v, headline %q", r.IdleShare, r.Headline)
	}
	if r.SamplerCPUMS != 2.5 || r.PeriodMS != 40 {
		t.Errorf("the sampler's cost %v ms, period %v ms: want the batch's 2.5 and 40", r.SamplerCPUMS, r.PeriodMS)
	}
	if n := len(r.Input.Samples); n != 75 {
		t.Errorf("%d samples kept, want 75 (the one naming thread 3 dropped)", n)
	}
	if st := r.Causes[0].Lines; len(st) != 1 || st[0].File != "/w/data.py" {
		t.Errorf("lines %+v", st)
	}
	var pl api.ProcessListResult
	call(t, cl, api.ProcessList, nil, &pl)
	if p := pl.Processes[0]; p.PID != 4101 || p.UtilGPU == nil || *p.UtilGPU != 0 || p.IdleTop != "waiting for the data loader at data.py:12" {
		t.Errorf("process.list %+v", p)
	}
	for _, p := range d.metricsState().Processes {
		if p.Idle == nil || p.Idle.Share != 1 || math.Abs(p.Idle.ByCause["data_loader"]-1) > 1e-9 {
			t.Errorf("metrics idle %+v", p.Idle)
		}
	}
	var snap api.SnapshotResult
	call(t, cl, api.SnapshotTake, api.TakeParams{PID: 4101, Analyze: true}, &snap)
	var findings []analyze.Finding
	call(t, cl, api.AnalysisFindings, api.IDParams{ID: snap.ID}, &findings)
	var idle *analyze.Finding
	for i := range findings {
		if findings[i].Kind == idleFindingKind {
			idle = &findings[i]
		}
	}
	if idle == nil || idle.File != "/w/data.py" || idle.Line != 12 || len(idle.Evidence.Lines) != 1 || idle.Evidence.Lines[0].Note != "GPU idle 100% here" {
		t.Errorf("the snapshot's gpu_idle finding: %+v", idle)
	}
	err = cl.Call(context.Background(), api.IdleReport, api.IdleParams{PID: 999}, &r)
	if client.Code(err) != api.CodeNotFound {
		t.Errorf("idle.report of a process without samples: %v, want CodeNotFound", err)
	}
}
