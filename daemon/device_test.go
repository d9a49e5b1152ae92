package daemon

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
)

// TestDeviceByUUID: an agent reports its device by CUDA's numbering (here 0:
// its CUDA_VISIBLE_DEVICES holds one GPU) and that GPU's UUID; process.list,
// the agent's torch reports and its snapshots' metadata say NVML's index of
// that GPU (5 of the simulated 8-GPU H200), not CUDA's 0 or its LOCAL_RANK.
// Without a UUID NVML knows, the agent's own index stands.
func TestDeviceByUUID(t *testing.T) {
	smp := simulatedH200(t)
	_, cfg := testDaemon(t, func(c *Config) { c.Sampler = smp })
	var uuid string
	for _, d := range smp.Devices() {
		if d.Index == 5 {
			uuid = d.UUID
		}
	}
	if !strings.HasPrefix(uuid, "GPU-") {
		t.Fatalf("the simulated GPU 5 has UUID %q", uuid)
	}
	torchForm := strings.ToUpper(strings.TrimPrefix(uuid, "GPU-")) // torch writes it without "GPU-"
	register := func(pid, device int, uuid string) *jsonrpc2.Conn {
		c, err := net.Dial("unix", cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
			var p api.DumpParams
			json.Unmarshal(*r.Params, &p)
			res, err := copyDump(fixtures+"gpt2_train.pickle", p.Path)
			res.Device = device
			return res, err
		})
		conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(h), jsonrpc2.SetLogger(discard{}))
		t.Cleanup(func() { conn.Close() })
		var res api.RegisterResult
		if err := conn.Call(context.Background(), api.AgentRegister, api.RegisterParams{PID: pid, Host: "test", Argv: []string{"python", "train.py"},
			LocalRank: 1, WorldSize: 2, Rank: 1, Device: device, DeviceUUID: uuid, Recording: true, APIVersion: api.Version}, &res); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	a := register(4101, 0, torchForm)
	register(4102, 0, "ffffffff-0000-0000-0000-000000000000") // a GPU NVML does not list
	if err := a.Notify(context.Background(), api.AgentTorch, api.TorchParams{Device: 0, Allocated: 1 << 30, Reserved: 2 << 30}); err != nil {
		t.Fatal(err)
	}
	client := dial(t, cfg.Socket)
	devices := map[int]int{}
	for end := 0; end < 200 && (devices[4101] != 5 || len(devices) < 2); end++ {
		var pl api.ProcessListResult
		call(t, client, api.ProcessList, nil, &pl)
		for _, p := range pl.Processes {
			if p.Agent {
				devices[p.PID] = p.Device
			}
		}
	}
	if devices[4101] != 5 || devices[4102] != 0 {
		t.Errorf("process.list devices %v, want 4101 on NVML's 5 and 4102 on its own 0", devices)
	}
	var snap api.SnapshotResult
	call(t, client, api.SnapshotTake, map[string]any{"pid": 4101}, &snap)
	if snap.Device != 5 {
		t.Errorf("the snapshot's device is %d, want NVML's 5", snap.Device)
	}
}
