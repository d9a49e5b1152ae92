package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// Phases are the values of vramscope_gpu_phase's phase label.
var Phases = []string{gpuphase.Compute, gpuphase.Bandwidth, gpuphase.PCIe, gpuphase.Offload, gpuphase.Starved, gpuphase.Idle}

var (
	gpuLabels  = []string{"gpu", "uuid"}
	procLabels = []string{"pid", "rank", "device", "pod", "namespace", "container", "pod_uid"}
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("vramscope_"+name, help, labels, nil)
}

// The metrics, in the order docs/metrics.md lists them.
var (
	gpuMemUsed  = desc("gpu_memory_used_bytes", "Device memory in use on the GPU, all processes (NVML).", gpuLabels...)
	gpuMemTotal = desc("gpu_memory_total_bytes", "Device memory of the GPU (NVML).", gpuLabels...)
	gpuUtil     = desc("gpu_utilization_ratio", "Share of the last sample period in which a kernel ran on the GPU, 0-1 (NVML).", gpuLabels...)
	gpuMemUtil  = desc("gpu_memory_controller_utilization_ratio", "Share of the last sample period in which device memory was read or written, 0-1 (NVML).", gpuLabels...)
	gpuPCIeRx   = desc("gpu_pcie_receive_bytes_per_second", "PCIe throughput from the host to the GPU (NVML).", gpuLabels...)
	gpuPCIeTx   = desc("gpu_pcie_transmit_bytes_per_second", "PCIe throughput from the GPU to the host (NVML).", gpuLabels...)
	gpuPower    = desc("gpu_power_watts", "Power drawn by the GPU (NVML).", gpuLabels...)
	gpuPhase    = desc("gpu_phase", "1 for the class of what the GPU did over the last 5 s (compute_bound, memory_bandwidth_bound, pcie_transfer, offload_traffic, input_starved, idle), 0 for the others.", append(gpuLabels, "phase")...)

	procAlloc     = desc("process_torch_allocated_bytes", "Memory held by tensors in the process (torch.cuda.memory_allocated), reported by its agent about once a second.", procLabels...)
	procReserved  = desc("process_torch_reserved_bytes", "Memory PyTorch's caching allocator holds from the driver (torch.cuda.memory_reserved).", procLabels...)
	procPeak      = desc("process_torch_peak_allocated_bytes", "Highest memory_allocated of the process so far (torch.cuda.max_memory_allocated).", procLabels...)
	procGPU       = desc("process_gpu_memory_used_bytes", "Device memory NVML counts for the process, CUDA context included, all its GPUs.", procLabels...)
	procRecording = desc("process_recording", "1 while the agent records the allocator's history (a snapshot then has stacks), else 0.", procLabels...)
	procWorld     = desc("process_world_size", "torch.distributed world size of the process (1 when not distributed).", procLabels...)
	procIdle      = desc("process_gpu_idle_ratio", "Share of the last minute the process's GPU did not compute, from its agent's stack samples joined with NVML utilisation (vramscope idle).", procLabels...)
	procIdleCause = desc("process_gpu_idle_cause_ratio", "That idle share split by cause: the line the training thread was on while the GPU idled (data_loader, sync, copy, checkpoint, logging, collective, python, no_samples).", append(procLabels, "cause")...)
	procOOMETA    = desc("process_oom_eta_seconds", "Seconds until the process's step peaks are projected to reach the memory it may use (its device, or its memory-fraction cap); present only while they grow in a sustained way.", procLabels...)

	agents       = desc("agents", "Processes with an agent attached to this daemon.")
	stored       = desc("store_snapshots", "Snapshots in the daemon's store now.")
	countersUp   = desc("counters_available", "1 when NVML sampling runs, 0 when not (no driver, disabled).")
	oomsTotal    = desc("ooms_captured_total", "Snapshots agents captured at a CUDA out-of-memory error since the daemon started.")
	snapsTotal   = desc("snapshots_stored_total", "Snapshots stored since the daemon started, by reason (request, oom, import, agent, warning, other).", "reason")
	findingTotal = desc("findings_total", "Findings in the analyses of the snapshots stored since the daemon started, by kind.", "kind")
)

// Descs lists every metric (for Describe and the documentation test).
func Descs() []*prometheus.Desc {
	return []*prometheus.Desc{gpuMemUsed, gpuMemTotal, gpuUtil, gpuMemUtil, gpuPCIeRx, gpuPCIeTx, gpuPower, gpuPhase,
		procAlloc, procReserved, procPeak, procGPU, procRecording, procWorld, procIdle, procIdleCause, procOOMETA,
		agents, stored, countersUp, oomsTotal, snapsTotal, findingTotal}
}

// Collector reads a State at every scrape.
type Collector struct {
	state func() State
}

// NewCollector returns a Collector over state, which must be safe to call
// from the scrape's goroutine and quick (it runs while Prometheus waits).
func NewCollector(state func() State) *Collector { return &Collector{state: state} }

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range Descs() {
		ch <- d
	}
}

// Collect sends the metrics of one State.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	for _, g := range s.GPUs {
		collectGPU(ch, g)
	}
	for _, p := range s.Processes {
		collectProcess(ch, p)
	}
	gauge(ch, agents, float64(s.Agents))
	gauge(ch, stored, float64(s.StoredSnapshots))
	gauge(ch, countersUp, b2f(s.CountersAvailable))
	ch <- prometheus.MustNewConstMetric(oomsTotal, prometheus.CounterValue, float64(s.OOMs))
	for k, v := range s.Snapshots {
		ch <- prometheus.MustNewConstMetric(snapsTotal, prometheus.CounterValue, float64(v), k)
	}
	for k, v := range s.Findings {
		ch <- prometheus.MustNewConstMetric(findingTotal, prometheus.CounterValue, float64(v), k)
	}
}

func collectGPU(ch chan<- prometheus.Metric, g GPU) {
	s := &g.Sample
	l := []string{strconv.Itoa(s.Device), s.UUID}
	opt := func(d *prometheus.Desc, f counters.Fields, v float64) {
		if s.Has(f) { // no data stays absent: a 0 would claim an idle GPU
			gauge(ch, d, v, l...)
		}
	}
	opt(gpuMemUsed, counters.FieldMemUsed, float64(s.MemUsedBytes))
	opt(gpuMemTotal, counters.FieldMemTotal, float64(s.MemTotalBytes))
	opt(gpuUtil, counters.FieldUtilGPU, float64(s.UtilGPUPct)/100)
	opt(gpuMemUtil, counters.FieldUtilMem, float64(s.UtilMemPct)/100)
	opt(gpuPCIeRx, counters.FieldPCIeRx, float64(s.PCIeRxKBps)*1024)
	opt(gpuPCIeTx, counters.FieldPCIeTx, float64(s.PCIeTxKBps)*1024)
	opt(gpuPower, counters.FieldPower, float64(s.PowerMW)/1000)
	if g.Phase == "" {
		return
	}
	for _, ph := range Phases {
		gauge(ch, gpuPhase, b2f(ph == g.Phase), append(l, ph)...)
	}
}

func collectProcess(ch chan<- prometheus.Metric, p Process) {
	l := []string{strconv.Itoa(p.PID), strconv.Itoa(p.Rank), strconv.Itoa(p.Device), p.Pod, p.Namespace, p.Container, p.PodUID}
	gauge(ch, procAlloc, float64(p.Allocated), l...)
	gauge(ch, procReserved, float64(p.Reserved), l...)
	gauge(ch, procPeak, float64(p.Peak), l...)
	if p.HasGPU {
		gauge(ch, procGPU, float64(p.GPUBytes), l...)
	}
	gauge(ch, procRecording, b2f(p.Recording), l...)
	gauge(ch, procWorld, float64(max(p.WorldSize, 1)), l...)
	if p.Idle != nil {
		gauge(ch, procIdle, p.Idle.Share, l...)
		for _, c := range IdleCauses {
			gauge(ch, procIdleCause, p.Idle.ByCause[c], append(l, c)...)
		}
	}
	if p.HasOOMETA {
		gauge(ch, procOOMETA, p.OOMETA, l...)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
