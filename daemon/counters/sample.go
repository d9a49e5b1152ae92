// sample.go: one reading of a GPU (DeviceSample) or of a process on it
// (ProcessSample), with the Valid mask that tells data from no data, and
// their JSON forms, which leave out what has no data.

package counters

import (
	"encoding/json"

	"github.com/vramscope/vramscope/daemon/api"
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

// MarshalJSON writes the fields that hold data: the wire form (Wire).
func (s DeviceSample) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.Wire())
}

// Wire is the sample as the daemon's API carries it: the fields that hold
// data, the others nil.
func (s DeviceSample) Wire() api.DeviceSample {
	w := api.DeviceSample{
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
		w.GPM = &api.GPMSample{
			SMActivePct:     opt(s.Valid, FieldGPMSMActive, &g.SMActivePct),
			SMOccupancyPct:  opt(s.Valid, FieldGPMSMOccupancy, &g.SMOccupancyPct),
			TensorActivePct: opt(s.Valid, FieldGPMTensorActive, &g.TensorActivePct),
			DRAMBWUtilPct:   opt(s.Valid, FieldGPMDRAMBW, &g.DRAMBWUtilPct),
		}
	}
	return w
}

// WireSamples are ss as the daemon's API carries them (never nil).
func WireSamples(ss []DeviceSample) []api.DeviceSample {
	out := make([]api.DeviceSample, len(ss))
	for i, s := range ss {
		out[i] = s.Wire()
	}
	return out
}

// WireProcessSamples are ps as the daemon's API carries them (never nil).
func WireProcessSamples(ps []ProcessSample) []api.ProcessSample {
	out := make([]api.ProcessSample, len(ps))
	for i, p := range ps {
		out[i] = p.Wire()
	}
	return out
}

// UnmarshalJSON reads MarshalJSON's form back, setting Valid from the fields
// present.
func (s *DeviceSample) UnmarshalJSON(b []byte) error {
	var w api.DeviceSample
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

func optP[T any](valid, f ProcFields, v *T) *T {
	if valid&f == 0 {
		return nil
	}
	return v
}

// MarshalJSON writes the fields that hold data: the wire form (Wire).
func (p ProcessSample) MarshalJSON() ([]byte, error) {
	return json.Marshal(p.Wire())
}

// Wire is the sample as the daemon's API carries it.
func (p ProcessSample) Wire() api.ProcessSample {
	return api.ProcessSample{
		TimeMS: p.TimeMS, Device: p.Device, PID: p.PID,
		UsedBytes:  optP(p.Valid, ProcUsed, &p.UsedBytes),
		SMUtilPct:  optP(p.Valid, ProcSMUtil, &p.SMUtilPct),
		MemUtilPct: optP(p.Valid, ProcMemUtil, &p.MemUtilPct),
	}
}

// UnmarshalJSON reads MarshalJSON's form back.
func (p *ProcessSample) UnmarshalJSON(b []byte) error {
	var w api.ProcessSample
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

// DeviceInfo is what does not change while a GPU is up, read once (the
// daemon's API declares it).
type DeviceInfo = api.DeviceInfo
