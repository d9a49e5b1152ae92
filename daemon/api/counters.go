package api

import "github.com/vramscope/vramscope/profiler/gpuphase"

// The NVML counters as the wire carries them (counters.devices,
// counters.series, counters_tick): daemon/counters keeps its samples with a
// mask of the fields that hold data and writes them as these types, where a
// field without data is left out. Declared once, here.

// DeviceSample is one reading of one GPU; a field without data is absent.
type DeviceSample struct {
	TimeMS           int64      `json:"time_ms"`                      // unix milliseconds
	Device           int        `json:"device"`                       // NVML index
	UUID             string     `json:"uuid,omitempty"`               // "GPU-…"
	MemUsedBytes     *uint64    `json:"mem_used_bytes,omitempty"`     // device memory in use
	MemTotalBytes    *uint64    `json:"mem_total_bytes,omitempty"`    // device memory
	MemReservedBytes *uint64    `json:"mem_reserved_bytes,omitempty"` // driver/firmware reservation (GetMemoryInfo_v2)
	UtilGPUPct       *uint32    `json:"util_gpu_pct,omitempty"`       // percent of time a kernel was running
	UtilMemPct       *uint32    `json:"util_mem_pct,omitempty"`       // percent of time device memory was read or written
	PCIeTxKBps       *uint32    `json:"pcie_tx_kbps,omitempty"`       // KiB/s, GPU to host
	PCIeRxKBps       *uint32    `json:"pcie_rx_kbps,omitempty"`       // KiB/s, host to GPU
	PowerMW          *uint32    `json:"power_mw,omitempty"`           // milliwatts
	TempC            *uint32    `json:"temp_c,omitempty"`             // degrees Celsius
	SMClockMHz       *uint32    `json:"sm_clock_mhz,omitempty"`       // SM clock
	GPM              *GPMSample `json:"gpm,omitempty"`                // Hopper+ GPU performance metrics, when any had data
}

// GPMSample holds the GPM metrics over the interval since the previous tick,
// each a percentage 0-100; a metric without data is absent.
type GPMSample struct {
	SMActivePct     *float64 `json:"sm_active_pct,omitempty"`     // SMs busy
	SMOccupancyPct  *float64 `json:"sm_occupancy_pct,omitempty"`  // warps resident / max
	TensorActivePct *float64 `json:"tensor_active_pct,omitempty"` // tensor cores busy
	DRAMBWUtilPct   *float64 `json:"dram_bw_util_pct,omitempty"`  // DRAM bandwidth used
}

// ProcessSample is one reading of one process on one GPU; a field without
// data is absent (NVML may hide a process's memory in a container).
type ProcessSample struct {
	TimeMS     int64   `json:"time_ms"`                // unix milliseconds
	Device     int     `json:"device"`                 // NVML index
	PID        uint32  `json:"pid"`                    // the process
	UsedBytes  *uint64 `json:"used_bytes,omitempty"`   // device memory the process holds
	SMUtilPct  *uint32 `json:"sm_util_pct,omitempty"`  // percent of SM time, over NVML's last sampling window
	MemUtilPct *uint32 `json:"mem_util_pct,omitempty"` // percent of memory-controller time
}

// DeviceInfo is what does not change while a GPU is up, read once.
type DeviceInfo struct {
	Index             int    `json:"index"`                        // NVML index
	Name              string `json:"name"`                         // e.g. "NVIDIA H100 80GB HBM3"
	UUID              string `json:"uuid"`                         // "GPU-…"
	MemoryTotalBytes  uint64 `json:"memory_total_bytes,omitempty"` // device memory
	Architecture      string `json:"architecture,omitempty"`       // "Hopper", "Ampere", …
	ComputeCapability string `json:"compute_capability,omitempty"` // "9.0"
	PCIBusID          string `json:"pci_bus_id,omitempty"`         // "00000000:19:00.0"
	GPM               bool   `json:"gpm"`                          // GPM metrics are sampled
}

// SeriesResult holds one device's samples (counters.series with a device).
type SeriesResult struct {
	Device  int            `json:"device"`  // as asked
	Samples []DeviceSample `json:"samples"` // oldest first
}

// ProcessSeriesResult holds one process's samples (counters.series with a pid).
type ProcessSeriesResult struct {
	Device  int             `json:"device"`  // as asked
	PID     int             `json:"pid"`     // as asked
	Samples []ProcessSample `json:"samples"` // oldest first
}

// DevicesResult lists the GPUs NVML sees and the sampler's state.
type DevicesResult struct {
	Status  CountersStatus   `json:"status"`  // the NVML sampler's state
	Devices []DeviceInfo     `json:"devices"` // the GPUs NVML sees
	Latest  []DeviceSample   `json:"latest"`  // the latest sample of each
	Phases  []gpuphase.Phase `json:"phases"`  // what each GPU does now (its last few seconds classified)
}

// OneOf is a result that is one of several types, each a zero value
// (counters.series: a device's samples or a process's).
type OneOf []any
