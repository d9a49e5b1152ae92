package daemon

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// On the H200 run of docs/gpu-e2e.md, NVML saw 8.27 GiB for the training pid
// while PyTorch had reserved 7.53 GiB: a CUDA context, no finding. The same
// snapshot with 6 GiB more in NVML's view (a library outside PyTorch), or with
// another process on the GPU, gets one.
func TestNonPyTorchMemory(t *testing.T) {
	r, err := analyze.Run("../examples/snapshots/agent_gpt2.pickle", analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var e2e struct {
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
	if f := nonPyTorchFindings(store.Meta{GPUBytes: nvml}, r); len(f) != 0 {
		t.Errorf("a CUDA context reported as non-PyTorch memory: %+v", f)
	}
	f := nonPyTorchFindings(store.Meta{GPUBytes: nvml + 6<<30}, r)
	if len(f) != 1 || f[0].Kind != "non_pytorch_memory" || f[0].Evidence.Numbers["outside_pytorch"] < 6<<30 {
		t.Errorf("6 GiB outside PyTorch: %+v", f)
	}
	f = nonPyTorchFindings(store.Meta{GPUBytes: nvml, OtherGPUBytes: 20 << 30, OtherPIDs: "4242"}, r)
	if len(f) != 1 || f[0].Evidence.Numbers["other_processes_bytes"] != 20<<30 {
		t.Errorf("another process: %+v", f)
	}
	if f := nonPyTorchFindings(store.Meta{}, r); f != nil {
		t.Errorf("no NVML data gave %+v", f)
	}
}
