// Package metrics exposes the daemon's state to Prometheus: a custom
// prometheus.Collector that asks the daemon for a State at every scrape, so
// nothing is kept in sync between scrapes and a process's series vanish the
// scrape after it goes. docs/metrics.md lists every metric; its test checks
// the page against Descs.
//
// Labels carry identities only (GPU index and UUID, pid, rank, device, pod,
// namespace, container, a snapshot's reason, a finding's kind): never a
// command line or a path, which may hold secrets and have no bound.
package metrics

import "github.com/vramscope/vramscope/daemon/counters"

// State is what one scrape reports.
type State struct {
	CountersAvailable bool
	GPUs              []GPU
	Processes         []Process
	Agents            int
	StoredSnapshots   int
	OOMs              uint64            // OOM snapshots captured since the daemon started
	Snapshots         map[string]uint64 // snapshots stored since start, by reason (Reasons)
	Findings          map[string]uint64 // findings in stored snapshots since start, by kind
}

// GPU is one GPU's latest counters (fields NVML lacks are left out of the
// scrape, never reported as 0) and the class of what it does now.
type GPU struct {
	Sample counters.DeviceSample
	Phase  string // a gpuphase class; "" while too few samples name one
}

// Process is one process with an agent.
type Process struct {
	PID       int
	Rank      int
	WorldSize int
	Device    int
	Recording bool
	Allocated int64 // torch.cuda.memory_allocated
	Reserved  int64 // torch.cuda.memory_reserved
	Peak      int64 // torch.cuda.max_memory_allocated
	GPUBytes  uint64
	HasGPU    bool   // NVML reported GPUBytes
	Pod       string // names from the kubelet, "" when not allowed to ask
	Namespace string
	Container string
	PodUID    string // from the process's cgroup (joins kube-state-metrics' kube_pod_info{uid})
	// Idle is why its GPU idled over the last minute (idle.report), nil
	// without stack samples or utilisation readings.
	Idle *Idle
	// OOMETA is the seconds until its step peaks are projected to reach the
	// memory it may use; HasOOMETA is false while they do not grow (or
	// the levels carry no times): the gauge is then absent, never 0.
	OOMETA    float64
	HasOOMETA bool
}

// Idle is a process's GPU idle share over the last minute and its split by
// cause (IdleCauses).
type Idle struct {
	Share   float64
	ByCause map[string]float64
}

// IdleCauses are the values of vramscope_process_gpu_idle_cause_ratio's
// cause label (profiler/idle's kinds): a fixed set.
var IdleCauses = []string{"data_loader", "sync", "copy", "checkpoint", "logging", "collective", "python", "no_samples"}

// Reasons are the values of the snapshots counter's reason label; the
// daemon maps anything else to "other" so an agent cannot grow the label.
var Reasons = []string{"request", "oom", "import", "agent", "warning", "other"}

// Reason is r if it is one of Reasons, else "other".
func Reason(r string) string {
	for _, k := range Reasons {
		if r == k {
			return r
		}
	}
	return "other"
}
