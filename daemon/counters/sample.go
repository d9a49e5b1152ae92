// sample.go: one reading of a GPU (DeviceSample) or of a process on it
// (ProcessSample), with the Valid mask that tells data from no data, and
// their JSON forms, which leave out what has no data.

package counters

import (
	"encoding/json"
)

// Fields is a bitmask of the DeviceSample fields that hold data.
type Fields uint16

// The DeviceSample fields that may be absent.
const (
	FieldMemUsed         Fields = 1 << iota // MemUsedBytes
	FieldMemTotal                           // MemTotalBytes
	FieldMemReserved                        // MemReservedBytes (GetMemoryInfo_v2 only)
	FieldUtilGPU                            // UtilGPUPct
	FieldUtilMem                            // UtilMemPct
	FieldPCIeTx                             // PCIeTxKBps
	FieldPCIeRx                             // PCIeRxKBps
	FieldPower                              // PowerMW
	FieldTemp                               // TempC
	FieldSMClock                            // SMClockMHz
	FieldGPMSMActive                        // GPM.SMActivePct
	FieldGPMSMOccupancy                     // GPM.SMOccupancyPct
	FieldGPMTensorActive                    // GPM.TensorActivePct
	FieldGPMDRAMBW                          // GPM.DRAMBWUtilPct

	// FieldsGPM is the set of GPM fields; GPM is non-nil when any is set.
	FieldsGPM = FieldGPMSMActive | FieldGPMSMOccupancy | FieldGPMTensorActive | FieldGPMDRAMBW
)

// DeviceSample is one reading of one GPU. Valid says which fields hold data;
// the others are zero and mean "no data" (see the package comment).
type DeviceSample struct {
	TimeMS int64  // unix milliseconds
	Device int    // NVML index
	UUID   string // "GPU-…"
	Valid  Fields

	MemUsedBytes     uint64
	MemTotalBytes    uint64
	MemReservedBytes uint64 // driver/firmware reservation, from GetMemoryInfo_v2
	UtilGPUPct       uint32 // percent of time a kernel was running (NVML's "GPU utilization")
	UtilMemPct       uint32 // percent of time device memory was read or written
	PCIeTxKBps       uint32 // KiB/s, GPU to host
	PCIeRxKBps       uint32 // KiB/s, host to GPU
	PowerMW          uint32
	TempC            uint32
	SMClockMHz       uint32

	// GPM holds the Hopper+ GPU performance metrics; nil when the GPU has no
	// GPM or none of its metrics had data this tick. Which of its fields hold
	// data is in Valid (FieldGPM…).
	GPM *GPMSample
}

// GPMSample holds the GPM metrics over the interval since the previous tick,
// each a percentage 0-100.
type GPMSample struct {
	SMActivePct     float64 // GPM_METRIC_SM_UTIL: SMs busy
	SMOccupancyPct  float64 // GPM_METRIC_SM_OCCUPANCY: warps resident / max
	TensorActivePct float64 // GPM_METRIC_ANY_TENSOR_UTIL
	DRAMBWUtilPct   float64 // GPM_METRIC_DRAM_BW_UTIL
}

// Has reports whether every field in f holds data.
func (s *DeviceSample) Has(f Fields) bool { return s.Valid&f == f }

// deviceSampleJSON is DeviceSample's wire form: absent fields are nil and
// left out.
type deviceSampleJSON struct {
	TimeMS           int64    `json:"time_ms"`
	Device           int      `json:"device"`
	UUID             string   `json:"uuid,omitempty"`
	MemUsedBytes     *uint64  `json:"mem_used_bytes,omitempty"`
	MemTotalBytes    *uint64  `json:"mem_total_bytes,omitempty"`
	MemReservedBytes *uint64  `json:"mem_reserved_bytes,omitempty"`
	UtilGPUPct       *uint32  `json:"util_gpu_pct,omitempty"`
	UtilMemPct       *uint32  `json:"util_mem_pct,omitempty"`
	PCIeTxKBps       *uint32  `json:"pcie_tx_kbps,omitempty"`
	PCIeRxKBps       *uint32  `json:"pcie_rx_kbps,omitempty"`
	PowerMW          *uint32  `json:"power_mw,omitempty"`
	TempC            *uint32  `json:"temp_c,omitempty"`
	SMClockMHz       *uint32  `json:"sm_clock_mhz,omitempty"`
	GPM              *gpmJSON `json:"gpm,omitempty"`
}

type gpmJSON struct {
	SMActivePct     *float64 `json:"sm_active_pct,omitempty"`
	SMOccupancyPct  *float64 `json:"sm_occupancy_pct,omitempty"`
	TensorActivePct *float64 `json:"tensor_active_pct,omitempty"`
	DRAMBWUtilPct   *float64 `json:"dram_bw_util_pct,omitempty"`
}

func opt[T any](valid, f Fields, v *T) *T {
	if valid&f == 0 {
		return nil
	}
	return v
}

func set[T any](valid *Fields, f Fields, dst *T, src *T) {
	if src != nil {
		*dst = *src
		*valid |= f
	}
}

// MarshalJSON writes the fields that hold data, snake_case.
func (s DeviceSample) MarshalJSON() ([]byte, error) {
	w := deviceSampleJSON{
		TimeMS: s.TimeMS, Device: s.Device, UUID: s.UUID,
		MemUsedBytes:     opt(s.Valid, FieldMemUsed, &s.MemUsedBytes),
		MemTotalBytes:    opt(s.Valid, FieldMemTotal, &s.MemTotalBytes),
		MemReservedBytes: opt(s.Valid, FieldMemReserved, &s.MemReservedBytes),
		UtilGPUPct:       opt(s.Valid, FieldUtilGPU, &s.UtilGPUPct),
		UtilMemPct:       opt(s.Valid, FieldUtilMem, &s.UtilMemPct),
		PCIeTxKBps:       opt(s.Valid, FieldPCIeTx, &s.PCIeTxKBps),
		PCIeRxKBps:       opt(s.Valid, FieldPCIeRx, &s.PCIeRxKBps),
		PowerMW:          opt(s.Valid, FieldPower, &s.PowerMW),
		TempC:            opt(s.Valid, FieldTemp, &s.TempC),
		SMClockMHz:       opt(s.Valid, FieldSMClock, &s.SMClockMHz),
	}
	if s.GPM != nil && s.Valid&FieldsGPM != 0 {
		g := *s.GPM
		w.GPM = &gpmJSON{
			SMActivePct:     opt(s.Valid, FieldGPMSMActive, &g.SMActivePct),
			SMOccupancyPct:  opt(s.Valid, FieldGPMSMOccupancy, &g.SMOccupancyPct),
			TensorActivePct: opt(s.Valid, FieldGPMTensorActive, &g.TensorActivePct),
			DRAMBWUtilPct:   opt(s.Valid, FieldGPMDRAMBW, &g.DRAMBWUtilPct),
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads MarshalJSON's form back, setting Valid from the fields
// present.
func (s *DeviceSample) UnmarshalJSON(b []byte) error {
	var w deviceSampleJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = DeviceSample{TimeMS: w.TimeMS, Device: w.Device, UUID: w.UUID}
	set(&s.Valid, FieldMemUsed, &s.MemUsedBytes, w.MemUsedBytes)
	set(&s.Valid, FieldMemTotal, &s.MemTotalBytes, w.MemTotalBytes)
	set(&s.Valid, FieldMemReserved, &s.MemReservedBytes, w.MemReservedBytes)
	set(&s.Valid, FieldUtilGPU, &s.UtilGPUPct, w.UtilGPUPct)
	set(&s.Valid, FieldUtilMem, &s.UtilMemPct, w.UtilMemPct)
	set(&s.Valid, FieldPCIeTx, &s.PCIeTxKBps, w.PCIeTxKBps)
	set(&s.Valid, FieldPCIeRx, &s.PCIeRxKBps, w.PCIeRxKBps)
	set(&s.Valid, FieldPower, &s.PowerMW, w.PowerMW)
	set(&s.Valid, FieldTemp, &s.TempC, w.TempC)
	set(&s.Valid, FieldSMClock, &s.SMClockMHz, w.SMClockMHz)
	if w.GPM != nil {
		g := &GPMSample{}
		set(&s.Valid, FieldGPMSMActive, &g.SMActivePct, w.GPM.SMActivePct)
		set(&s.Valid, FieldGPMSMOccupancy, &g.SMOccupancyPct, w.GPM.SMOccupancyPct)
		set(&s.Valid, FieldGPMTensorActive, &g.TensorActivePct, w.GPM.TensorActivePct)
		set(&s.Valid, FieldGPMDRAMBW, &g.DRAMBWUtilPct, w.GPM.DRAMBWUtilPct)
		if s.Valid&FieldsGPM != 0 {
			s.GPM = g
		}
	}
	return nil
}

// ProcFields is a bitmask of the ProcessSample fields that hold data.
type ProcFields uint8

// The ProcessSample fields that may be absent.
const (
	ProcUsed    ProcFields = 1 << iota // UsedBytes (NVML may hide it, e.g. in a container)
	ProcSMUtil                         // SMUtilPct, from GetProcessUtilization
	ProcMemUtil                        // MemUtilPct, from GetProcessUtilization
)

// ProcessSample is one reading of one process on one GPU.
type ProcessSample struct {
	TimeMS     int64 // unix milliseconds
	Device     int
	PID        uint32
	Valid      ProcFields
	UsedBytes  uint64 // device memory the process holds
	SMUtilPct  uint32 // percent of SM time, over NVML's last sampling window
	MemUtilPct uint32 // percent of memory-controller time
}

// Has reports whether every field in f holds data.
func (p *ProcessSample) Has(f ProcFields) bool { return p.Valid&f == f }

type processSampleJSON struct {
	TimeMS     int64   `json:"time_ms"`
	Device     int     `json:"device"`
	PID        uint32  `json:"pid"`
	UsedBytes  *uint64 `json:"used_bytes,omitempty"`
	SMUtilPct  *uint32 `json:"sm_util_pct,omitempty"`
	MemUtilPct *uint32 `json:"mem_util_pct,omitempty"`
}

func optP[T any](valid, f ProcFields, v *T) *T {
	if valid&f == 0 {
		return nil
	}
	return v
}

// MarshalJSON writes the fields that hold data, snake_case.
func (p ProcessSample) MarshalJSON() ([]byte, error) {
	return json.Marshal(processSampleJSON{
		TimeMS: p.TimeMS, Device: p.Device, PID: p.PID,
		UsedBytes:  optP(p.Valid, ProcUsed, &p.UsedBytes),
		SMUtilPct:  optP(p.Valid, ProcSMUtil, &p.SMUtilPct),
		MemUtilPct: optP(p.Valid, ProcMemUtil, &p.MemUtilPct),
	})
}

// UnmarshalJSON reads MarshalJSON's form back.
func (p *ProcessSample) UnmarshalJSON(b []byte) error {
	var w processSampleJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = ProcessSample{TimeMS: w.TimeMS, Device: w.Device, PID: w.PID}
	if w.UsedBytes != nil {
		p.UsedBytes, p.Valid = *w.UsedBytes, p.Valid|ProcUsed
	}
	if w.SMUtilPct != nil {
		p.SMUtilPct, p.Valid = *w.SMUtilPct, p.Valid|ProcSMUtil
	}
	if w.MemUtilPct != nil {
		p.MemUtilPct, p.Valid = *w.MemUtilPct, p.Valid|ProcMemUtil
	}
	return nil
}

// DeviceInfo is what does not change while a GPU is up, read once.
type DeviceInfo struct {
	Index             int    `json:"index"`
	Name              string `json:"name"`
	UUID              string `json:"uuid"`
	MemoryTotalBytes  uint64 `json:"memory_total_bytes,omitempty"`
	Architecture      string `json:"architecture,omitempty"`       // "Hopper", "Ampere", …
	ComputeCapability string `json:"compute_capability,omitempty"` // "9.0"
	PCIBusID          string `json:"pci_bus_id,omitempty"`         // "00000000:19:00.0"
	GPM               bool   `json:"gpm"`                          // GPM metrics are sampled
}
