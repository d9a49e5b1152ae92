// Package gpuphase reads GPU counter recordings — vramscope's own NVML samples
// (`vramscope counters --json`, the daemon's counters.series) or the text of
// `nvidia-smi dmon -s pucmt` — and splits them into phases, each with a class
// and the evidence: compute_bound, memory_bandwidth_bound, pcie_transfer,
// offload_traffic, input_starved, idle. Standard library only.
//
// utilization.gpu alone misleads: on an H200 pure host<->device copies read
// ~97% "GPU utilization" with ~2% memory utilisation, so transfers are told
// apart by their PCIe bytes first, bandwidth-bound work by memory utilisation
// (or GPM DRAM bandwidth), and compute by the rest.
package gpuphase

import "math"

// Sample is one reading of one GPU. NaN means no data.
type Sample struct {
	TimeMS      int64
	Device      int
	UtilGPU     float64 // % of time a kernel ran
	UtilMem     float64 // % of time device memory was read or written
	PowerW      float64
	RxMBps      float64 // host to device
	TxMBps      float64 // device to host
	MemUsedMiB  float64
	MemTotalMiB float64
	SMActive    float64 // GPM (Hopper+), %
	DRAMBW      float64 // GPM DRAM bandwidth utilisation, %
}

func nan() float64 { return math.NaN() }

func blank(t int64, dev int) Sample {
	return Sample{TimeMS: t, Device: dev, UtilGPU: nan(), UtilMem: nan(), PowerW: nan(), RxMBps: nan(), TxMBps: nan(),
		MemUsedMiB: nan(), MemTotalMiB: nan(), SMActive: nan(), DRAMBW: nan()}
}

// The classes a phase can have.
const (
	Compute   = "compute_bound"
	Bandwidth = "memory_bandwidth_bound"
	PCIe      = "pcie_transfer"
	Offload   = "offload_traffic"
	Starved   = "input_starved"
	Idle      = "idle"
)

// Thresholds of the rules, from the H200 recordings in testdata (labelled
// phases) and the measurements in the issue: copies move ~30 GB/s each way
// at ~2% memory utilisation; HBM-bound copies read ~98% memory utilisation;
// compute-bound matmuls ~24%; a starved loop ~3% GPU utilisation.
const (
	pcieBusyMBps    = 2000 // both directions together
	bandwidthMemPct = 60
	dramBWPct       = 50
	busyGPUPct      = 50
	idleGPUPct      = 5
	heldMiB         = 2048 // memory beyond a CUDA context: someone keeps tensors on the device
	nearlyFull      = 0.90
)

// classify names one (aggregated) sample, returning the rule's reason.
func classify(s Sample) (string, string) {
	pcie := sum(s.RxMBps, s.TxMBps)
	full := !math.IsNaN(s.MemTotalMiB) && s.MemTotalMiB > 0 && s.MemUsedMiB/s.MemTotalMiB >= nearlyFull
	memBusy := s.UtilMem >= bandwidthMemPct || s.DRAMBW >= dramBWPct
	switch {
	case pcie >= pcieBusyMBps && !memBusy:
		if full {
			return Offload, "host<->device traffic with device memory nearly full"
		}
		return PCIe, "host<->device traffic; memory and SMs mostly idle whatever utilization.gpu says"
	case memBusy:
		return Bandwidth, "device memory busy most of the time"
	case s.UtilGPU >= busyGPUPct:
		return Compute, "kernels running, memory not the limit"
	case s.MemUsedMiB >= heldMiB:
		return Starved, "GPU mostly idle while memory is held: waiting for input or the host"
	}
	return Idle, "nothing running, nothing held"
}

func sum(a, b float64) float64 {
	switch {
	case math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return a + b
}
