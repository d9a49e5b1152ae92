package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// nvmlAt records in meta what NVML sees on the process's GPU now.
func (d *Daemon) nvmlAt(meta *store.Meta, pid, device int) {
	for _, p := range d.counters.Processes() {
		switch {
		case p.PID == pid:
			meta.GPUBytes += p.UsedBytes
		case p.Device == device:
			meta.OtherGPUBytes += p.UsedBytes
			if meta.OtherPIDs != "" {
				meta.OtherPIDs += ","
			}
			meta.OtherPIDs += strconv.Itoa(p.PID)
		}
	}
}

// Thresholds of non_pytorch_memory: a CUDA context takes ~0.5-1 GiB beyond
// what the caching allocator reserves (0.74 GiB for GPT-2 on the H200 run of
// docs/gpu-e2e.md), so only more than contextAllowance and more than a fifth
// of the reservation is reported.
const (
	contextAllowance = 3 << 29 // 1.5 GiB
	otherProcsFloor  = 1 << 30
)

// contextTypical is what a CUDA context with PyTorch's kernels loaded takes
// outside the allocator: 0.74 GiB for GPT-2 on the H200 run of
// docs/gpu-e2e.md (NVML 8.27 GiB, reserved 7.53 GiB), 0.67-0.74 GiB in the
// agent's four OOM recordings of examples/snapshots/oom. A finding names it
// as the likely share of the context, and the rest as something else.
const contextTypical = 3 << 28 // 768 MiB

// nonPyTorchFindings compares NVML's view of the process's GPU memory, taken
// with the snapshot, with what PyTorch reserved: memory PyTorch does not know
// about (CUDA context, NCCL buffers, cuBLAS workspaces, other libraries), or
// other processes on the same GPU. total is the GPU's memory (0: unknown),
// for the share of the device it takes.
func nonPyTorchFindings(m store.Meta, r *analyze.Result, total uint64) []analyze.Finding {
	if m.GPUBytes == 0 || r == nil {
		return nil
	}
	var reserved int64
	for _, d := range r.Devices {
		if d.Device == m.Device || len(r.Devices) == 1 {
			reserved += d.Allocator.Reserved
		}
	}
	var out []analyze.Finding
	extra := int64(m.GPUBytes) - reserved
	if extra > contextAllowance && float64(extra) > 0.2*float64(reserved) {
		out = append(out, outsideFinding(m, r, reserved, extra, total))
	}
	if m.OtherGPUBytes > otherProcsFloor {
		out = append(out, analyze.Finding{
			Kind: "non_pytorch_memory", Severity: "warning",
			Title:    fmt.Sprintf("other processes hold %s on this GPU (pids %s)", profiler.FormatBytes(int64(m.OtherGPUBytes)), m.OtherPIDs),
			Evidence: analyze.Evidence{Numbers: map[string]int64{"other_processes_bytes": int64(m.OtherGPUBytes)}},
			Fix:      "stop or move the other processes (vramscope ps lists them), or set CUDA_VISIBLE_DEVICES so each job gets its own GPU",
		})
	}
	return out
}

// outsideFinding says how much is outside PyTorch, its share of the device,
// and what it is likely made of: a CUDA context (contextTypical), then NCCL
// buffers in a distributed job, else another library in the process.
func outsideFinding(m store.Meta, r *analyze.Result, reserved, extra int64, total uint64) analyze.Finding {
	nums := map[string]int64{"nvml_process_bytes": int64(m.GPUBytes), "pytorch_reserved": reserved, "outside_pytorch": extra,
		"context_estimate": contextTypical, "beyond_context": extra - contextTypical}
	share := ""
	if total > 0 {
		nums["device_total"] = int64(total)
		nums["device_share_pct"] = (100*extra + int64(total)/2) / int64(total)
		share = fmt.Sprintf(" (%d%% of the %s device)", nums["device_share_pct"], profiler.FormatBytes(int64(total)))
	}
	likely, fix := "another CUDA library in this process (CuPy, JAX, TensorRT, a custom extension's cudaMalloc)",
		"look for a library that allocates with cudaMalloc itself (CuPy, JAX, TensorRT, custom extensions) and give it a pool limit, or free its memory before training; "
	if distributed(m, r) {
		likely, fix = "NCCL's communicator buffers (a distributed job)",
			"NCCL keeps buffers per communicator and peer: lower NCCL_BUFFSIZE or NCCL_MAX_NCHANNELS, create fewer process groups, or destroy unused ones; "
	}
	return analyze.Finding{
		Kind: "non_pytorch_memory", Severity: "warning",
		Title: fmt.Sprintf("%s of this process's GPU memory%s is outside PyTorch's allocator (NVML %s, PyTorch reserved %s): about %s is a CUDA context, the other %s likely %s",
			profiler.FormatBytes(extra), share, profiler.FormatBytes(int64(m.GPUBytes)), profiler.FormatBytes(reserved),
			profiler.FormatBytes(contextTypical), profiler.FormatBytes(extra-contextTypical), likely),
		Evidence: analyze.Evidence{Numbers: nums},
		Fix: fix + "cuBLAS/cuDNN workspaces PyTorch makes come from its allocator, so they are in the reserved figure; " +
			"torch.cuda.mem_get_info shows the device's view",
	}
}

// distributed says whether the snapshot's process is one rank of a job:
// a rank or group recorded by the agent, or torch.distributed in its stacks.
func distributed(m store.Meta, r *analyze.Result) bool {
	if m.Rank > 0 || m.Group != "" {
		return true
	}
	for _, s := range r.Sites {
		if strings.Contains(s.File, "torch/distributed/") {
			return true
		}
	}
	return false
}

// snapshotDeviceTotal is the memory of the snapshot's GPU as NVML reports it
// here; 0 when NVML is not available or the snapshot came from another host.
func (d *Daemon) snapshotDeviceTotal(m store.Meta) uint64 {
	if h, err := os.Hostname(); m.Host != "" && (err != nil || h != m.Host) {
		return 0
	}
	return uint64(max(0, d.deviceTotal(m.Device)))
}
