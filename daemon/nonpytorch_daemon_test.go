package daemon

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// Through the daemon: on the simulated H200, pid 4101 holds 6 GiB on GPU 0
// in NVML's view; its agent hands over a real snapshot whose allocator
// reserved far less (expandable, a few hundred MiB). The stored snapshot's
// analysis gets a non_pytorch_memory finding whose share is of that GPU's
// memory as NVML reports it.
func TestNonPyTorchShareThroughDaemon(t *testing.T) {
	smp := simulatedH200(t)
	_, cfg := testDaemon(t, func(c *Config) { c.Sampler = smp })
	var uuid string
	var total uint64
	for _, d := range smp.Devices() {
		if d.Index == 0 {
			uuid, total = d.UUID, d.MemoryTotalBytes
		}
	}
	host, _ := os.Hostname()
	c, err := net.Dial("unix", cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		var p api.DumpParams
		json.Unmarshal(*r.Params, &p)
		return copyDump("../examples/snapshots/expandable.pickle", p.Path)
	})
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(h), jsonrpc2.SetLogger(discard{}))
	t.Cleanup(func() { conn.Close() })
	var reg api.RegisterResult
	if err := conn.Call(context.Background(), api.AgentRegister, api.RegisterParams{PID: 4101, Host: host, Argv: []string{"python", "infer.py"},
		Device: 0, DeviceUUID: uuid, Recording: true, APIVersion: api.Version}, &reg); err != nil {
		t.Fatal(err)
	}
	client := dial(t, cfg.Socket)
	seen := func() bool { // NVML's per-process figure comes with the counters' first tick
		var pl api.ProcessListResult
		call(t, client, api.ProcessList, nil, &pl)
		for _, p := range pl.Processes {
			if p.PID == 4101 && p.Agent && p.GPUBytes > 0 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !seen(); {
		if time.Now().After(deadline) {
			t.Fatal("process.list never showed NVML's figure for pid 4101")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var snap api.SnapshotResult
	call(t, client, api.SnapshotTake, map[string]any{"pid": 4101}, &snap)
	if snap.GPUBytes != 6<<30 {
		t.Fatalf("the snapshot's NVML figure is %d, want the simulated 6 GiB", snap.GPUBytes)
	}
	var fs []analyze.Finding
	call(t, client, api.AnalysisFindings, map[string]any{"id": snap.ID}, &fs)
	var got *analyze.Finding
	for i := range fs {
		if fs[i].Kind == "non_pytorch_memory" {
			got = &fs[i]
		}
	}
	if got == nil {
		t.Fatalf("no non_pytorch_memory finding: %+v", fs)
	}
	n := got.Evidence.Numbers
	if total == 0 || n["device_total"] != int64(total) || n["device_share_pct"] != (100*n["outside_pytorch"]+int64(total)/2)/int64(total) {
		t.Errorf("device %d bytes; finding numbers %v", total, n)
	}
}
