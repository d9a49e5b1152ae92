package daemon

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// The whatif recordings (GPT-2 at batch 2, 4 and 8 on the H200) stand in for
// the snapshots of three ranks: real snapshots whose peaks differ the way an
// uneven split of the batch makes them differ. They are not one launch.
var whatifRanks = []string{"../examples/snapshots/whatif/whatif_bs2.pickle", "../examples/snapshots/whatif/whatif_bs4.pickle",
	"../examples/snapshots/whatif/whatif_bs8.pickle"}

// rankAgent registers as rank `rank` of a launch (facts: run_id, master_addr,
// master_port, ppid, as the Python agent sends them) and answers agent.dump
// with dump.
func rankAgent(t *testing.T, socket string, pid, rank, world int, facts map[string]any, device int, uuid string,
	dump func(path string) (any, error)) *jsonrpc2.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		var p api.DumpParams
		json.Unmarshal(*r.Params, &p)
		return dump(p.Path)
	})
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(h), jsonrpc2.SetLogger(discard{}))
	t.Cleanup(func() { conn.Close() })
	params := map[string]any{"pid": pid, "host": "test", "rank": rank, "local_rank": rank, "world_size": world,
		"argv": []string{"python", "train.py"}, "python": "3.11.2", "device": device, "recording": true, "api_version": api.Version}
	if uuid != "" {
		params["device_uuid"] = uuid
	}
	for k, v := range facts {
		params[k] = v
	}
	var res api.RegisterResult
	if err := conn.Call(context.Background(), api.AgentRegister, params, &res); err != nil {
		t.Fatalf("register rank %d: %v", rank, err)
	}
	return conn
}

// barrier answers each rank's dump only once all n ranks have been asked:
// a daemon that asked them one after another never gets an answer from the
// first and the capture fails. Each rank reports when it read its state.
type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
	at      map[string]float64 // snapshot file -> at_ms reported
}

func newBarrier(n int) *barrier {
	return &barrier{n: n, all: make(chan struct{}), at: map[string]float64{}}
}

func (b *barrier) dump(src string) func(path string) (any, error) {
	return func(path string) (any, error) {
		b.mu.Lock()
		if b.arrived++; b.arrived == b.n {
			close(b.all)
		}
		b.mu.Unlock()
		select {
		case <-b.all:
		case <-time.After(20 * time.Second):
			return nil, &jsonrpc2.Error{Code: api.CodeAgentFailed, Message: "asked one rank after another, not together"}
		}
		at := float64(time.Now().UnixMicro()) / 1000
		res, err := copyDump(src, path)
		b.mu.Lock()
		b.at[filepath.Base(src)] = at
		b.mu.Unlock()
		return map[string]any{"path": res.Path, "bytes": res.Bytes, "entries": res.Entries, "took_ms": 1, "device": 0, "at_ms": at}, err
	}
}

func TestJobKey(t *testing.T) {
	for _, c := range []struct {
		world int
		facts api.JobFacts
		want  string
	}{
		{2, api.JobFacts{RunID: "r1", MasterAddr: "h", MasterPort: "29500", PPID: 7}, "run:r1"},
		{2, api.JobFacts{RunID: "none", MasterAddr: "h", MasterPort: "29500", PPID: 7}, "master:h:29500"}, // torchrun without --rdzv-id
		{2, api.JobFacts{PPID: 7}, "parent:7"},
		{1, api.JobFacts{PPID: 7}, ""}, // a lone process's parent is no job
		{2, api.JobFacts{}, ""},
	} {
		if got := jobKey(c.world, c.facts); got != c.want {
			t.Errorf("jobKey(%d, %+v) = %q, want %q", c.world, c.facts, got, c.want)
		}
	}
}

// TestGroupTake: three ranks of one launch and a process of another; asking
// rank 1 captures the three together (the barrier proves it), stores them as
// one group with the skew of their reported times, and the rank view finds
// rank 2 heavy.
func TestGroupTake(t *testing.T) {
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	stored := make(chan api.GroupResult, 4)
	sub.Notify = func(method string, p json.RawMessage) {
		var g api.GroupResult
		if method == api.EventGroupStored && json.Unmarshal(p, &g) == nil {
			stored <- g
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"group_stored"}}, nil)
	b := newBarrier(3)
	facts := map[string]any{"run_id": "none", "master_addr": "127.0.0.1", "master_port": "29500", "ppid": 500}
	for rank, src := range whatifRanks {
		rankAgent(t, cfg.Socket, 7000+rank, rank, 3, facts, 0, "", b.dump(src))
	}
	other := map[string]any{"run_id": "none", "master_addr": "127.0.0.1", "master_port": "29501", "ppid": 500}
	rankAgent(t, cfg.Socket, 7100, 0, 2, other, 0, "", func(string) (any, error) {
		t.Error("a process of another launch was asked")
		return nil, nil
	})
	c := dial(t, cfg.Socket)
	var ps api.ProcessListResult
	call(t, c, api.ProcessList, nil, &ps)
	for _, p := range ps.Processes {
		if want := map[bool]string{true: "master:127.0.0.1:29501", false: "master:127.0.0.1:29500"}[p.PID == 7100]; p.Job != want {
			t.Errorf("process.list: pid %d's job %q, want %q", p.PID, p.Job, want)
		}
	}
	var g api.GroupResult
	call(t, c, api.GroupTake, api.GroupTakeParams{PID: 7001, Label: "step 3"}, &g)
	if g.Job != "master:127.0.0.1:29500" || g.Reason != "request" || len(g.Members) != 3 || len(g.Snapshots) != 3 || len(g.Failed) != 0 {
		t.Fatalf("group %+v", g)
	}
	lo, hi := b.at["whatif_bs2.pickle"], b.at["whatif_bs2.pickle"]
	for i, m := range g.Members {
		s := g.Snapshots[i]
		if m.Rank != i || m.PID != 7000+i || s.ID != m.ID || s.Rank != i || s.Label != "step 3" {
			t.Errorf("member %d: %+v, snapshot %+v", i, m, s)
		}
		meta, _ := d.store.Get(m.ID)
		if meta.Group != g.ID {
			t.Errorf("rank %d's meta names group %q", i, meta.Group)
		}
		at := b.at[filepath.Base(whatifRanks[i])]
		if m.CapturedMS != at {
			t.Errorf("rank %d captured at %.3f, the agent said %.3f", i, m.CapturedMS, at)
		}
		lo, hi = min(lo, at), max(hi, at)
	}
	if g.SkewMS != hi-lo {
		t.Errorf("skew %.3f ms, want %.3f", g.SkewMS, hi-lo)
	}
	select {
	case ev := <-stored:
		if ev.ID != g.ID {
			t.Errorf("group_stored names %s", ev.ID)
		}
	case <-time.After(10 * time.Second):
		t.Error("no group_stored notification")
	}
	var rv analyze.Ranks
	call(t, c, api.AnalysisRanks, api.RanksParams{Group: g.ID}, &rv)
	if rv.MaxRank != 2 || rv.MedianRank != 1 || len(rv.Outliers) != 2 || rv.Ranks[2].Source != g.Members[2].ID {
		t.Errorf("ranks %+v", rv)
	}
	var list api.GroupListResult
	call(t, c, api.GroupList, nil, &list)
	if len(list.Groups) != 1 || list.Groups[0].ID != g.ID || list.Groups[0].SkewMS != g.SkewMS {
		t.Errorf("group.list %+v", list)
	}
	err := c.Call(context.Background(), api.GroupGet, api.IDParams{ID: "job-nope"}, nil)
	if client.Code(err) != api.CodeNotFound {
		t.Errorf("group.get of no group: %v", err)
	}
}

// TestGroupTakeOneRankFails: a rank that cannot dump is listed as failed;
// the others are stored.
func TestGroupTakeOneRankFails(t *testing.T) {
	_, cfg := testDaemon(t)
	facts := map[string]any{"run_id": "job-7", "ppid": 500}
	rankAgent(t, cfg.Socket, 7200, 0, 2, facts, 0, "", func(path string) (any, error) { return copyDump(whatifRanks[0], path) })
	rankAgent(t, cfg.Socket, 7201, 1, 2, facts, 0, "", func(string) (any, error) {
		return nil, &jsonrpc2.Error{Code: api.CodeAgentFailed, Message: "agent.dump failed: CUDA error"}
	})
	c := dial(t, cfg.Socket)
	var g api.GroupResult
	call(t, c, api.GroupTake, api.GroupTakeParams{PID: 7200}, &g)
	if g.Job != "run:job-7" || len(g.Members) != 1 || len(g.Failed) != 1 || g.Failed[0].Rank != 1 || !strings.Contains(g.Failed[0].Error, "CUDA error") {
		t.Errorf("group %+v", g)
	}
}

// TestOOMFansOut: rank 0 runs out of memory and hands over its snapshot;
// the daemon captures ranks 1 and 2 into the same group, reason oom.
func TestOOMFansOut(t *testing.T) {
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	stored := make(chan api.GroupResult, 4)
	sub.Notify = func(method string, p json.RawMessage) {
		var g api.GroupResult
		if method == api.EventGroupStored && json.Unmarshal(p, &g) == nil {
			stored <- g
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"group_stored"}}, nil)
	facts := map[string]any{"run_id": "oomjob", "ppid": 600}
	b := newBarrier(2)
	oom := rankAgent(t, cfg.Socket, 7300, 0, 3, facts, 0, "", func(string) (any, error) {
		t.Error("the rank that ran out of memory was asked again")
		return nil, nil
	})
	for rank := 1; rank < 3; rank++ {
		rankAgent(t, cfg.Socket, 7300+rank, rank, 3, facts, 0, "", b.dump(whatifRanks[rank]))
	}
	part := filepath.Join(d.store.IncomingDir(), "7300-oom.part")
	if err := copyFile("../examples/snapshots/oom/too_big.pickle", part); err != nil {
		t.Fatal(err)
	}
	var res api.SnapshotResult
	err := oom.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: part},
		Reason: "oom", OOM: &api.OOMRaw{Requested: 1 << 30}}, &res)
	if err != nil {
		t.Fatal(err)
	}
	var g api.GroupResult
	select {
	case g = <-stored:
	case <-time.After(30 * time.Second):
		t.Fatal("no group after the OOM")
	}
	if g.Reason != "oom" || g.Job != "run:oomjob" || len(g.Members) != 3 || g.Members[0].ID != res.ID {
		t.Fatalf("group after the OOM: %+v", g)
	}
	for _, s := range g.Snapshots {
		meta, _ := d.store.Get(s.ID)
		if meta.Group != g.ID || meta.Reason != "oom" {
			t.Errorf("rank %d: group %q reason %q", meta.Rank, meta.Group, meta.Reason)
		}
	}
}

// TestRanksDeviceByUUID: two ranks with CUDA_VISIBLE_DEVICES of one GPU each
// both say CUDA device 0; their UUIDs put them on NVML's GPUs 3 and 5 of the
// simulated H200, and the rank view says so.
func TestRanksDeviceByUUID(t *testing.T) {
	smp := simulatedH200(t)
	_, cfg := testDaemon(t, func(c *Config) { c.Sampler = smp })
	uuids := map[int]string{}
	for _, dev := range smp.Devices() {
		uuids[dev.Index] = strings.ToUpper(strings.TrimPrefix(dev.UUID, "GPU-")) // as torch writes it
	}
	facts := map[string]any{"master_addr": "10.0.0.1", "master_port": "1234"}
	for rank, nvml := range []int{3, 5} {
		src := whatifRanks[rank]
		rankAgent(t, cfg.Socket, 7400+rank, rank, 2, facts, 0, uuids[nvml], func(path string) (any, error) { return copyDump(src, path) })
	}
	c := dial(t, cfg.Socket)
	var g api.GroupResult
	call(t, c, api.GroupTake, api.GroupTakeParams{PID: 7400}, &g)
	var rv analyze.Ranks
	call(t, c, api.AnalysisRanks, api.RanksParams{Group: g.ID}, &rv)
	if len(rv.Ranks) != 2 || rv.Ranks[0].Device != 3 || rv.Ranks[1].Device != 5 || !rv.Ranks[0].NVMLSeen || !rv.Ranks[1].NVMLSeen {
		t.Errorf("rank devices: %+v", rv.Ranks)
	}
}

// TestGroupTakeRefusesDuplicateRanks: two processes of one job claim rank
// 0 (two launches sharing a rendezvous, or a lying agent); group.take says
// so and stores nothing (it stored a group holding rank 0 twice).
func TestGroupTakeRefusesDuplicateRanks(t *testing.T) {
	d, cfg := testDaemon(t)
	facts := map[string]any{"run_id": "dup"}
	for i, src := range whatifRanks[:2] {
		rankAgent(t, cfg.Socket, 7400+i, 0, 2, facts, 0, "", newBarrier(1).dump(src))
	}
	err := dial(t, cfg.Socket).Call(context.Background(), api.GroupTake, api.GroupTakeParams{PID: 7400}, nil)
	if client.Code(err) != api.CodeInvalidParams || !strings.Contains(err.Error(), "two processes of rank 0") {
		t.Errorf("group.take: %v", err)
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots stored", n)
	}
}

// TestGroupTakeOverLimits: a job with more ranks than --max-snapshots is
// refused before any rank is asked; under a byte limit that holds one rank,
// the group says which ranks retention removed (it lost them silently).
func TestGroupTakeOverLimits(t *testing.T) {
	facts := map[string]any{"run_id": "big"}
	d, cfg := testDaemon(t, func(c *Config) { c.MaxSnapshots = 2 })
	for rank, src := range whatifRanks {
		rankAgent(t, cfg.Socket, 7500+rank, rank, 3, facts, 0, "", newBarrier(1).dump(src))
	}
	err := dial(t, cfg.Socket).Call(context.Background(), api.GroupTake, api.GroupTakeParams{PID: 7500}, nil)
	if client.Code(err) != api.CodeInvalidParams || !strings.Contains(err.Error(), "3 ranks and the store keeps at most 2") {
		t.Errorf("group.take over --max-snapshots: %v", err)
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots stored", n)
	}

	d, cfg = testDaemon(t, func(c *Config) { c.MaxBytes = 1 })
	b := newBarrier(3)
	for rank, src := range whatifRanks {
		rankAgent(t, cfg.Socket, 7600+rank, rank, 3, facts, 0, "", b.dump(src))
	}
	var g api.GroupResult
	call(t, dial(t, cfg.Socket), api.GroupTake, api.GroupTakeParams{PID: 7600}, &g)
	if len(g.Members)+len(g.Failed) != 3 || len(g.Members) != len(d.store.List()) {
		t.Fatalf("group %+v with %d snapshots stored", g, len(d.store.List()))
	}
	for _, f := range g.Failed {
		if !strings.Contains(f.Error, "removed by the retention limits") {
			t.Errorf("rank %d: %q", f.Rank, f.Error)
		}
	}
	t.Logf("under a 1-byte limit: %d of 3 ranks kept, the others named as removed", len(g.Members))
}
