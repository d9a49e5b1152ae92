package daemon

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// On the H200 run of docs/gpu-e2e.md, NVML saw 8.27 GiB for the training pid
// while PyTorch had reserved 7.53 GiB: a CUDA context, no finding. The same
// snapshot with 6 GiB more in NVML's view (a library outside PyTorch), or with
// another process on the GPU, gets one; with the device's memory (NVML's
// 140.4 GiB in that run) it says the share of the device, and it names the
// likely owner: a library for a single process, NCCL for a rank of a job.
func TestNonPyTorchMemory(t *testing.T) {
	r, err := analyze.Run("../examples/snapshots/agent_gpt2.pickle", analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var e2e struct {
		Devices struct {
			Devices []struct {
				MemoryTotalBytes uint64 `json:"memory_total_bytes"`
			} `json:"devices"`
		} `json:"devices"`
		Training struct {
			Process struct {
				GPUBytes uint64 `json:"gpu_bytes"`
			} `json:"process"`
		} `json:"training"`
	}
	b, err := os.ReadFile("../docs/gpu-e2e.json")
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &e2e)
	nvml := e2e.Training.Process.GPUBytes
	if nvml == 0 {
		t.Fatal("gpu-e2e.json has no NVML figure for the training pid")
	}
	if len(e2e.Devices.Devices) == 0 || e2e.Devices.Devices[0].MemoryTotalBytes == 0 {
		t.Fatal("gpu-e2e.json has no device memory")
	}
	total := e2e.Devices.Devices[0].MemoryTotalBytes
	if f := nonPyTorchFindings(store.Meta{GPUBytes: nvml}, r, total); len(f) != 0 {
		t.Errorf("a CUDA context reported as non-PyTorch memory: %+v", f)
	}
	f := nonPyTorchFindings(store.Meta{GPUBytes: nvml + 6<<30}, r, total)
	if len(f) != 1 || f[0].Kind != "non_pytorch_memory" || f[0].Evidence.Numbers["outside_pytorch"] < 6<<30 {
		t.Fatalf("6 GiB outside PyTorch: %+v", f)
	}
	n := f[0].Evidence.Numbers
	outside := n["outside_pytorch"]
	if n["device_total"] != int64(total) || n["device_share_pct"] != (100*outside+int64(total)/2)/int64(total) || n["device_share_pct"] < 4 {
		t.Errorf("share of the device: %v", n)
	}
	if n["beyond_context"] != outside-n["context_estimate"] || !strings.Contains(f[0].Title, "% of the 140.") ||
		!strings.Contains(f[0].Title, "likely another CUDA library") {
		t.Errorf("a single process: %s %v", f[0].Title, n)
	}
	f = nonPyTorchFindings(store.Meta{GPUBytes: nvml + 6<<30, Rank: 3}, r, 0)
	if len(f) != 1 || !strings.Contains(f[0].Title, "likely NCCL") || strings.Contains(f[0].Title, "of the device") ||
		f[0].Evidence.Numbers["device_total"] != 0 || !strings.Contains(f[0].Fix, "NCCL_BUFFSIZE") {
		t.Errorf("rank 3 of a job, device memory unknown: %+v", f)
	}
	f = nonPyTorchFindings(store.Meta{GPUBytes: nvml, OtherGPUBytes: 20 << 30, OtherPIDs: "4242"}, r, total)
	if len(f) != 1 || f[0].Evidence.Numbers["other_processes_bytes"] != 20<<30 {
		t.Errorf("another process: %+v", f)
	}
	if f := nonPyTorchFindings(store.Meta{}, r, total); f != nil {
		t.Errorf("no NVML data gave %+v", f)
	}
}

// The agent's OOM recordings of examples/snapshots/oom (H200, examples/oom)
// carry NVML's figure for their process: 0.67-0.74 GiB beyond what PyTorch
// reserved, a CUDA context each. None gets a finding, and the context the
// finding would name (contextTypical) is within 0.1 GiB of each.
func TestNonPyTorchMemoryOnAgentRecordings(t *testing.T) {
	for _, name := range []string{"kept_growth", "late_long_batch", "lora", "too_big"} {
		base := "../examples/snapshots/oom/" + name
		b, err := os.ReadFile(base + ".meta.json")
		if err != nil {
			t.Fatal(err)
		}
		var m store.Meta
		if err := json.Unmarshal(b, &m); err != nil || m.GPUBytes == 0 {
			t.Fatalf("%s.meta.json: %v, gpu_bytes %d", name, err, m.GPUBytes)
		}
		r, err := analyze.Run(base+".pickle", analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if f := nonPyTorchFindings(m, r, 0); len(f) != 0 {
			t.Errorf("%s: a CUDA context reported: %s", name, f[0].Title)
		}
		var reserved int64
		for _, d := range r.Devices {
			reserved += d.Allocator.Reserved
		}
		if d := int64(m.GPUBytes) - reserved - contextTypical; d < -(1<<30)/10 || d > (1<<30)/10 {
			t.Errorf("%s: %d bytes outside PyTorch, %d from the context estimate", name, int64(m.GPUBytes)-reserved, d)
		}
	}
}
