// Package counters samples NVIDIA GPU counters — memory used/total/reserved,
// utilisation, PCIe throughput, power, temperature, SM clock, the Hopper+ GPM
// metrics (SM active, SM occupancy, tensor active, DRAM bandwidth) and the
// per-process memory and utilisation NVML reports — and keeps an hour of them
// in bounded ring buffers for the daemon to serve.
//
// The package is split so that everything but the NVML binding builds without
// cgo: this file holds the types, the Sampler interface and the Collector
// (the ring-buffer store); nvml.go (cgo) implements Sampler on
// github.com/NVIDIA/go-nvml; nvml_nocgo.go stands in for it when cgo is off.
//
// # No data
//
// A metric the GPU does not report (NVML answers NOT_SUPPORTED, NOT_FOUND, or
// any other per-metric error) is "no data": never an error and never a fake 0.
// DeviceSample and ProcessSample carry a bitmask (Valid) saying which fields
// hold data; their JSON form simply leaves the other fields out, so a real 0
// (an idle GPU) and no data stay distinct in both forms. The mask keeps the
// samples free of pointers, which keeps the ring buffers compact and out of
// the garbage collector's way.
//
// # Schedule and cost
//
// NVML calls are ioctls into the driver, and some are dear (measured on an
// H200, driver 580): GPM sample + metrics 175 µs, GetProcessUtilization
// 2.5 ms, GetPcieThroughput 1 ms of CPU and 20 ms of wall time; memory,
// temperature, clocks 3-10 µs, utilisation 19 µs. To stay near 0.5% of one
// core on eight GPUs at 10 Hz, the NVML sampler reads memory and the process
// list on every tick, and the slow tier — utilisation, power, temperature, SM
// clock, GPM (over the time since the previous slow tick) — every
// SlowPeriod; per-process utilisation every ProcUtilPeriod, and the 20 ms
// PCIe call (only for GPUs whose GPM does not give PCIe) once per
// PCIeSlowPeriod. Samples between are no data for those fields. Latest fills
// each field from the newest sample that has it (at most LatestMaxAge old),
// and Series' downsampling keeps every field's bucket maximum, so both views
// stay complete.
package counters

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
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

// Status says whether counters can be read, and how sampling goes.
type Status struct {
	Available         bool   `json:"available"`
	Reason            string `json:"reason,omitempty"` // why not, when !Available
	DriverVersion     string `json:"driver_version,omitempty"`
	NVMLVersion       string `json:"nvml_version,omitempty"`
	CUDADriverVersion int    `json:"cuda_driver_version,omitempty"` // 12040 for 12.4
	DeviceCount       int    `json:"device_count"`
	IntervalMS        int64  `json:"interval_ms,omitempty"`
	Samples           uint64 `json:"samples"` // ticks sampled
	Errors            uint64 `json:"errors"`  // ticks whose Sample failed, returned an error or panicked
	LastError         string `json:"last_error,omitempty"`
	LostDevices       []int  `json:"lost_devices,omitempty"` // GPU_IS_LOST and the like: no longer sampled
	// DroppedProcessSamples counts process samples not kept because
	// MaxProcesses (process, GPU) pairs were all still running.
	DroppedProcessSamples uint64 `json:"dropped_process_samples,omitempty"`
}

// Sampler reads the counters of every GPU once per call. Implementations need
// not be safe for concurrent use: the Collector calls them from one goroutine.
type Sampler interface {
	// Devices lists the GPUs, read once when the sampler was opened.
	Devices() []DeviceInfo
	// Sample reads every GPU. The slices, and the GPMSamples they point to,
	// are the sampler's own and are reused by the next call. Samples returned together with an error are good (a
	// GPU was lost while the others still answer); a metric a GPU does not
	// report is no data in its sample, not an error.
	Sample(now time.Time) ([]DeviceSample, []ProcessSample, error)
	// Status reports availability, versions and the device count.
	Status() Status
	// Close releases the library; the sampler returns nothing afterwards.
	Close()
}

// Unavailable returns a Sampler with no devices that reports st (with
// Available forced false) and never samples: what Open returns without a
// driver, or without cgo.
func Unavailable(st Status) Sampler {
	st.Available = false
	return unavailable{st}
}

type unavailable struct{ st Status }

func (u unavailable) Devices() []DeviceInfo { return nil }
func (u unavailable) Sample(time.Time) ([]DeviceSample, []ProcessSample, error) {
	return nil, nil, nil
}
func (u unavailable) Status() Status { return u.st }
func (u unavailable) Close()         {}

// The NVML sampler's schedule (see the package comment).
const (
	SlowPeriod     = time.Second
	ProcUtilPeriod = 5 * time.Second
	PCIeSlowPeriod = time.Second
	// LatestMaxAge bounds how old a field Latest and Processes fill in from an
	// earlier sample may be.
	LatestMaxAge = 10 * time.Second
	// scheduleSlack lets a due read happen on the tick that arrives a little
	// early, so a 1 s period at 100 ms ticks is 1 s, not 1.1 s.
	scheduleSlack = 25
)

// Defaults of Options.
const (
	DefaultInterval     = 100 * time.Millisecond
	DefaultHistory      = time.Hour
	DefaultMaxProcesses = 16
)

// Options configure a Collector; zero fields take the defaults.
type Options struct {
	Interval time.Duration // between samples; DefaultInterval (10 Hz)
	// Capacity is the number of samples kept per GPU; the default holds
	// DefaultHistory at Interval (36,000 at 10 Hz).
	Capacity int
	// ProcessCapacity is the number of samples kept per (process, GPU); the
	// default is Capacity.
	ProcessCapacity int
	// MaxProcesses bounds the (process, GPU) pairs with a history; when a
	// new one appears, the one gone longest is dropped. DefaultMaxProcesses.
	MaxProcesses int
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Capacity <= 0 {
		o.Capacity = int((DefaultHistory + o.Interval - 1) / o.Interval)
	}
	if o.ProcessCapacity <= 0 {
		o.ProcessCapacity = o.Capacity
	}
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = DefaultMaxProcesses
	}
	return o
}

// devRecord is a DeviceSample as the ring keeps it: 64 bytes, no pointers.
// Percentages fit a byte, the clock and temperature 16 bits, the GPM metrics
// hundredths of a percent in 16 bits.
type devRecord struct {
	timeMS             int64
	used, total, resv  uint64
	tx, rx, power      uint32
	clock, temp        uint16
	valid              Fields
	utilGPU, utilMem   uint8
	smAct, smOcc, tens uint16
	dram               uint16
}

// procRecord is a ProcessSample as the ring keeps it: 24 bytes.
type procRecord struct {
	timeMS int64
	used   uint64
	valid  ProcFields
	sm     uint8
	mem    uint8
}

func sat8(v uint32) uint8 { return uint8(min(v, math.MaxUint8)) }

func sat16(v uint32) uint16 { return uint16(min(v, math.MaxUint16)) }

// centi stores a percentage in hundredths, saturating.
func centi(v float64) uint16 {
	if !(v > 0) { // also NaN
		return 0
	}
	return uint16(min(math.Round(v*100), math.MaxUint16))
}

func toRecord(s *DeviceSample) devRecord {
	r := devRecord{
		timeMS: s.TimeMS, used: s.MemUsedBytes, total: s.MemTotalBytes, resv: s.MemReservedBytes,
		tx: s.PCIeTxKBps, rx: s.PCIeRxKBps, power: s.PowerMW,
		clock: sat16(s.SMClockMHz), temp: sat16(s.TempC), valid: s.Valid,
		utilGPU: sat8(s.UtilGPUPct), utilMem: sat8(s.UtilMemPct),
	}
	if s.GPM == nil {
		r.valid &^= FieldsGPM
	} else {
		r.smAct, r.smOcc = centi(s.GPM.SMActivePct), centi(s.GPM.SMOccupancyPct)
		r.tens, r.dram = centi(s.GPM.TensorActivePct), centi(s.GPM.DRAMBWUtilPct)
	}
	return r
}

func (r *devRecord) sample(device int, uuid string) DeviceSample {
	s := DeviceSample{
		TimeMS: r.timeMS, Device: device, UUID: uuid, Valid: r.valid,
		MemUsedBytes: r.used, MemTotalBytes: r.total, MemReservedBytes: r.resv,
		UtilGPUPct: uint32(r.utilGPU), UtilMemPct: uint32(r.utilMem),
		PCIeTxKBps: r.tx, PCIeRxKBps: r.rx, PowerMW: r.power,
		TempC: uint32(r.temp), SMClockMHz: uint32(r.clock),
	}
	if r.valid&FieldsGPM != 0 {
		s.GPM = &GPMSample{
			SMActivePct: float64(r.smAct) / 100, SMOccupancyPct: float64(r.smOcc) / 100,
			TensorActivePct: float64(r.tens) / 100, DRAMBWUtilPct: float64(r.dram) / 100,
		}
	}
	return s
}

// ring is a bounded buffer of records in time order. It grows by append up to
// its capacity, so a short history costs little, then overwrites the oldest.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest record once full
	cap  int
}

func (r *ring[T]) push(v T) {
	if len(r.buf) < r.cap {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.head] = v
	r.head++
	if r.head == r.cap {
		r.head = 0
	}
}

func (r *ring[T]) len() int { return len(r.buf) }

// at returns the i-th oldest record.
func (r *ring[T]) at(i int) *T {
	i += r.head
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	return &r.buf[i]
}

func (r *ring[T]) last() *T {
	if len(r.buf) == 0 {
		return nil
	}
	return r.at(len(r.buf) - 1)
}

// span returns the index range [lo, hi) of the records with fromMS <= time <=
// toMS (toMS <= 0: no upper bound), the records being in time order.
func (r *ring[T]) span(timeOf func(*T) int64, fromMS, toMS int64) (int, int) {
	n := r.len()
	lo := sort.Search(n, func(i int) bool { return timeOf(r.at(i)) >= fromMS })
	hi := n
	if toMS > 0 {
		hi = sort.Search(n, func(i int) bool { return timeOf(r.at(i)) > toMS })
	}
	return lo, max(lo, hi)
}

// pick chooses which records of [lo, hi) a query returns: all of them when
// there are at most maxPoints (or maxPoints <= 0), otherwise one per each of
// maxPoints equal buckets (by index): the record with the largest weight
// (memory; the first on ties), so a peak is never averaged or skipped away,
// with every other field raised to its maximum over the bucket's records
// that have it (fields read once a second would otherwise mostly vanish).
func pick[T any](r *ring[T], lo, hi, maxPoints int, weight func(*T) uint64, merge func(dst, src *T), emit func(*T)) {
	n := hi - lo
	if maxPoints <= 0 || n <= maxPoints {
		for i := lo; i < hi; i++ {
			emit(r.at(i))
		}
		return
	}
	for b := 0; b < maxPoints; b++ {
		start := lo + b*n/maxPoints
		end := lo + (b+1)*n/maxPoints
		best := r.at(start)
		for i := start + 1; i < end; i++ {
			if v := r.at(i); weight(v) > weight(best) {
				best = v
			}
		}
		acc := *best
		for i := start; i < end; i++ {
			merge(&acc, r.at(i))
		}
		emit(&acc)
	}
}

// maxField raises *a to b for field f when b has it and a lacks it or is
// smaller.
func maxField[T cmp.Ordered](av *Fields, bv, f Fields, a *T, b T) {
	if bv&f != 0 && (*av&f == 0 || b > *a) {
		*a = b
		*av |= f
	}
}

// maxWith raises every field of r to b's where b has it, keeping r's time.
func (r *devRecord) maxWith(b *devRecord) {
	v := b.valid
	maxField(&r.valid, v, FieldMemUsed, &r.used, b.used)
	maxField(&r.valid, v, FieldMemTotal, &r.total, b.total)
	maxField(&r.valid, v, FieldMemReserved, &r.resv, b.resv)
	maxField(&r.valid, v, FieldUtilGPU, &r.utilGPU, b.utilGPU)
	maxField(&r.valid, v, FieldUtilMem, &r.utilMem, b.utilMem)
	maxField(&r.valid, v, FieldPCIeTx, &r.tx, b.tx)
	maxField(&r.valid, v, FieldPCIeRx, &r.rx, b.rx)
	maxField(&r.valid, v, FieldPower, &r.power, b.power)
	maxField(&r.valid, v, FieldTemp, &r.temp, b.temp)
	maxField(&r.valid, v, FieldSMClock, &r.clock, b.clock)
	maxField(&r.valid, v, FieldGPMSMActive, &r.smAct, b.smAct)
	maxField(&r.valid, v, FieldGPMSMOccupancy, &r.smOcc, b.smOcc)
	maxField(&r.valid, v, FieldGPMTensorActive, &r.tens, b.tens)
	maxField(&r.valid, v, FieldGPMDRAMBW, &r.dram, b.dram)
}

func (r *procRecord) maxWith(b *procRecord) {
	v := Fields(b.valid)
	av := Fields(r.valid)
	maxField(&av, v, Fields(ProcUsed), &r.used, b.used)
	maxField(&av, v, Fields(ProcSMUtil), &r.sm, b.sm)
	maxField(&av, v, Fields(ProcMemUtil), &r.mem, b.mem)
	r.valid = ProcFields(av)
}

type procKey struct {
	pid    uint32
	device int
}

type procHist struct {
	ring     ring[procRecord]
	lastSeen int64 // tick time (ms) it was last listed by NVML

	// The newest utilisation, for Processes.
	utilMS    int64
	utilValid ProcFields
	sm, mem   uint32
}

// Collector runs a Sampler every interval on its own goroutine and keeps the
// history: one ring per GPU, one per (process, GPU). Every method is safe for
// concurrent use.
type Collector struct {
	s       Sampler
	opts    Options
	devInfo []DeviceInfo // Sampler.Devices, read once

	mu      sync.RWMutex
	devs    []*ring[devRecord] // by NVML index; nil for an index never seen
	uuids   []string           // by NVML index, from Sampler.Devices
	cur     []latestState      // by NVML index: every field's newest value
	curDevs []int              // the GPUs in the last tick, in its order
	current []ProcessSample    // last tick's processes
	procs   map[procKey]*procHist
	status  Status // Sampler.Status as of the last tick
	samples uint64
	errs    uint64
	lastErr string
	dropped uint64 // process samples not kept: MaxProcesses pairs all still running
	subs    map[int]func([]DeviceSample)
	nextSub int

	runMu  sync.Mutex // guards cancel/done
	cancel context.CancelFunc
	done   chan struct{}
	base   time.Time
}

// NewCollector returns a Collector over s; call Start to begin sampling.
func NewCollector(s Sampler, opts Options) *Collector {
	c := &Collector{s: s, opts: opts.withDefaults(), procs: map[procKey]*procHist{}, subs: map[int]func([]DeviceSample){}}
	c.devInfo = s.Devices()
	c.status = s.Status()
	for _, d := range c.devInfo {
		if d.Index >= 0 {
			c.growTo(d.Index)
			c.uuids[d.Index] = d.UUID
		}
	}
	return c
}

// DeviceByUUID is the NVML index of the GPU with this UUID ("GPU-…", or
// torch's form without the prefix), if NVML knows it.
func (c *Collector) DeviceByUUID(uuid string) (int, bool) {
	want := NormalUUID(uuid)
	if want == "" {
		return 0, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, u := range c.uuids {
		if u != "" && NormalUUID(u) == want {
			return i, true
		}
	}
	return 0, false
}

// NormalUUID puts NVML's "GPU-ab04…" and torch's "ab04…" in one form.
func NormalUUID(u string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(u), "GPU-"))
}

// Options returns the options in force, defaults filled in.
func (c *Collector) Options() Options { return c.opts }

func (c *Collector) growTo(index int) {
	for len(c.devs) <= index {
		c.devs = append(c.devs, nil)
		c.uuids = append(c.uuids, "")
		c.cur = append(c.cur, latestState{})
	}
}

// latestState is one GPU's newest value of every field, and when each was
// read.
type latestState struct {
	s  DeviceSample // GPM nil: the values are in g
	g  GPMSample
	at [16]int64 // per Fields bit: unix ms of the sample it came from
}

// update takes the fields src has and drops those older than maxAgeMS.
func (st *latestState) update(src *DeviceSample, timeMS, maxAgeMS int64) {
	v := src.Valid
	if src.GPM == nil {
		v &^= FieldsGPM
	}
	st.s.TimeMS, st.s.Device = timeMS, src.Device
	if src.UUID != "" {
		st.s.UUID = src.UUID
	}
	var zero DeviceSample
	for b := range st.at {
		f := Fields(1) << b
		switch {
		case v&f != 0:
			copyField(&st.s, &st.g, src, src.GPM, f)
			st.at[b] = timeMS
			st.s.Valid |= f
		case st.s.Valid&f != 0 && timeMS-st.at[b] > maxAgeMS:
			copyField(&st.s, &st.g, &zero, &GPMSample{}, f)
			st.s.Valid &^= f
		}
	}
}

// copyField copies field f from (src, srcG) to (dst, dstG).
func copyField(dst *DeviceSample, dstG *GPMSample, src *DeviceSample, srcG *GPMSample, f Fields) {
	switch f {
	case FieldMemUsed:
		dst.MemUsedBytes = src.MemUsedBytes
	case FieldMemTotal:
		dst.MemTotalBytes = src.MemTotalBytes
	case FieldMemReserved:
		dst.MemReservedBytes = src.MemReservedBytes
	case FieldUtilGPU:
		dst.UtilGPUPct = src.UtilGPUPct
	case FieldUtilMem:
		dst.UtilMemPct = src.UtilMemPct
	case FieldPCIeTx:
		dst.PCIeTxKBps = src.PCIeTxKBps
	case FieldPCIeRx:
		dst.PCIeRxKBps = src.PCIeRxKBps
	case FieldPower:
		dst.PowerMW = src.PowerMW
	case FieldTemp:
		dst.TempC = src.TempC
	case FieldSMClock:
		dst.SMClockMHz = src.SMClockMHz
	case FieldGPMSMActive:
		dstG.SMActivePct = srcG.SMActivePct
	case FieldGPMSMOccupancy:
		dstG.SMOccupancyPct = srcG.SMOccupancyPct
	case FieldGPMTensorActive:
		dstG.TensorActivePct = srcG.TensorActivePct
	case FieldGPMDRAMBW:
		dstG.DRAMBWUtilPct = srcG.DRAMBWUtilPct
	}
}

// Start samples once now, then every interval until ctx ends or Stop is
// called. Calling Start on a running collector does nothing.
func (c *Collector) Start(ctx context.Context) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	c.cancel, c.done = cancel, make(chan struct{})
	c.base = time.Now()
	go c.loop(ctx, c.done)
}

// Stop ends the sampling goroutine and waits for it. The Sampler stays open:
// Close it when done. Stop is idempotent; Start may be called again.
func (c *Collector) Stop() {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel, c.done = nil, nil
}

func (c *Collector) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		// Wall time advanced by the monotonic clock, so stored times never
		// step back when the system clock is set.
		c.tick(c.base.Add(time.Since(c.base)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick takes one sample now and stores it; the sampling goroutine calls it
// every interval. A panic or error in the Sampler is recovered and counted
// (Status().Errors, LastError) and sampling goes on.
func (c *Collector) tick(now time.Time) {
	devs, procs, err := c.sample(now)
	st := c.samplerStatus()
	nowMS := now.UnixMilli()

	c.mu.Lock()
	c.samples++
	if err != nil {
		c.errs++
		c.lastErr = err.Error()
	}
	c.status = st
	c.curDevs = c.curDevs[:0]
	maxAge := LatestMaxAge.Milliseconds()
	for i := range devs {
		s := &devs[i]
		if s.Device < 0 {
			continue
		}
		c.growTo(s.Device)
		r := c.devs[s.Device]
		if r == nil {
			r = &ring[devRecord]{cap: c.opts.Capacity}
			c.devs[s.Device] = r
		}
		rec := toRecord(s)
		if last := r.last(); last != nil && rec.timeMS < last.timeMS {
			rec.timeMS = last.timeMS // keep the ring in time order
		}
		r.push(rec)
		if s.UUID != "" && c.uuids[s.Device] == "" {
			c.uuids[s.Device] = s.UUID
		}
		c.cur[s.Device].update(s, rec.timeMS, maxAge)
		c.curDevs = append(c.curDevs, s.Device)
	}
	c.current = append(c.current[:0], procs...)
	// Mark every listed process seen before making room for new ones, so a
	// running process is never the one dropped.
	for i := range procs {
		if h := c.procs[procKey{procs[i].PID, procs[i].Device}]; h != nil {
			h.lastSeen = nowMS
		}
	}
	for i := range procs {
		c.pushProc(&procs[i], nowMS)
	}
	subs := c.subsLocked()
	c.mu.Unlock()

	for _, f := range subs {
		c.notify(f, devs)
	}
}

// sample calls the Sampler, turning a panic into an error.
func (c *Collector) sample(now time.Time) (devs []DeviceSample, procs []ProcessSample, err error) {
	defer func() {
		if p := recover(); p != nil {
			devs, procs, err = nil, nil, fmt.Errorf("sampler panicked: %v", p)
		}
	}()
	return c.s.Sample(now)
}

// samplerStatus reads the Sampler's status on the sampling goroutine (a
// Sampler need not be safe for concurrent use), surviving a panic.
func (c *Collector) samplerStatus() (st Status) {
	defer func() {
		if p := recover(); p != nil {
			c.mu.RLock()
			st = c.status
			c.mu.RUnlock()
		}
	}()
	return c.s.Status()
}

func (c *Collector) notify(f func([]DeviceSample), devs []DeviceSample) {
	defer func() {
		if p := recover(); p != nil {
			c.mu.Lock()
			c.errs++
			c.lastErr = fmt.Sprintf("OnTick callback panicked: %v", p)
			c.mu.Unlock()
		}
	}()
	f(devs)
}

func (c *Collector) subsLocked() []func([]DeviceSample) {
	if len(c.subs) == 0 {
		return nil
	}
	keys := make([]int, 0, len(c.subs))
	for k := range c.subs {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]func([]DeviceSample), len(keys))
	for i, k := range keys {
		out[i] = c.subs[k]
	}
	return out
}

func (c *Collector) pushProc(p *ProcessSample, nowMS int64) {
	k := procKey{p.PID, p.Device}
	h := c.procs[k]
	if h == nil {
		if len(c.procs) >= c.opts.MaxProcesses && !c.evictLocked(nowMS) {
			c.dropped++
			return
		}
		h = &procHist{ring: ring[procRecord]{cap: c.opts.ProcessCapacity}}
		c.procs[k] = h
	}
	h.lastSeen = nowMS
	if u := p.Valid & (ProcSMUtil | ProcMemUtil); u != 0 {
		h.utilMS, h.utilValid, h.sm, h.mem = p.TimeMS, u, p.SMUtilPct, p.MemUtilPct
	}
	r := procRecord{timeMS: p.TimeMS, used: p.UsedBytes, valid: p.Valid, sm: sat8(p.SMUtilPct), mem: sat8(p.MemUtilPct)}
	if last := h.ring.last(); last != nil && r.timeMS < last.timeMS {
		r.timeMS = last.timeMS
	}
	h.ring.push(r)
}

// evictLocked drops the (process, GPU) history gone longest; it refuses when
// every one was seen this tick.
func (c *Collector) evictLocked(nowMS int64) bool {
	var victim procKey
	oldest := int64(math.MaxInt64)
	for k, h := range c.procs {
		if h.lastSeen < oldest || (h.lastSeen == oldest && (k.pid < victim.pid || k.pid == victim.pid && k.device < victim.device)) {
			victim, oldest = k, h.lastSeen
		}
	}
	if oldest >= nowMS {
		return false
	}
	delete(c.procs, victim)
	return true
}

// OnTick registers f to be called after each tick with that tick's samples,
// on the sampling goroutine, after the store is updated. f must return
// quickly (hand off to a channel with a non-blocking send, say): the next
// sample waits for it. The slice is the sampler's and valid only during the
// call: copy what you keep. A panic in f is recovered and counted. The
// returned function unsubscribes.
func (c *Collector) OnTick(f func(samples []DeviceSample)) (cancel func()) {
	c.mu.Lock()
	id := c.nextSub
	c.nextSub++
	c.subs[id] = f
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}
}

func devTime(r *devRecord) int64    { return r.timeMS }
func devWeight(r *devRecord) uint64 { return r.used }
func procTime(r *procRecord) int64  { return r.timeMS }
func procWeight(r *procRecord) uint64 {
	return r.used
}

// Series returns device's samples with fromMS <= TimeMS <= toMS (toMS <= 0:
// up to now), oldest first. When more than maxPoints (> 0) match, the range is
// cut into maxPoints equal buckets, each represented by its sample with the
// most memory used (its time and memory), every other field raised to its
// maximum over the bucket's samples that have it.
func (c *Collector) Series(device int, fromMS, toMS int64, maxPoints int) []DeviceSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if device < 0 || device >= len(c.devs) || c.devs[device] == nil {
		return nil
	}
	r := c.devs[device]
	lo, hi := r.span(devTime, fromMS, toMS)
	n := hi - lo
	if maxPoints > 0 {
		n = min(n, maxPoints)
	}
	out := make([]DeviceSample, 0, n)
	uuid := c.uuids[device]
	pick(r, lo, hi, maxPoints, devWeight, (*devRecord).maxWith, func(rec *devRecord) {
		out = append(out, rec.sample(device, uuid))
	})
	return out
}

// ProcessSeries returns pid's samples on every GPU it used, with fromMS <=
// TimeMS <= toMS (toMS <= 0: up to now), ordered by time then GPU, each GPU
// downsampled to maxPoints (> 0) as Series does.
func (c *Collector) ProcessSeries(pid uint32, fromMS, toMS int64, maxPoints int) []ProcessSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ProcessSample
	for k, h := range c.procs {
		if k.pid != pid {
			continue
		}
		lo, hi := h.ring.span(procTime, fromMS, toMS)
		pick(&h.ring, lo, hi, maxPoints, procWeight, (*procRecord).maxWith, func(r *procRecord) {
			out = append(out, ProcessSample{
				TimeMS: r.timeMS, Device: k.device, PID: pid, Valid: r.valid,
				UsedBytes: r.used, SMUtilPct: uint32(r.sm), MemUtilPct: uint32(r.mem),
			})
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TimeMS != out[j].TimeMS {
			return out[i].TimeMS < out[j].TimeMS
		}
		return out[i].Device < out[j].Device
	})
	return out
}

// Latest returns, for each GPU in the last tick, the newest value of every
// field: the last tick's sample, with the fields it lacks (the slow tier is
// read once a second) taken from the newest earlier sample that has them, no
// older than LatestMaxAge. TimeMS is the last tick's. The result is a copy.
func (c *Collector) Latest() []DeviceSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]DeviceSample, 0, len(c.curDevs))
	for _, d := range c.curDevs {
		st := &c.cur[d]
		s := st.s
		if s.Valid&FieldsGPM != 0 {
			g := st.g
			s.GPM = &g
		}
		out = append(out, s)
	}
	return out
}

// Processes returns the processes NVML listed on the last tick, with the
// device memory each holds; SM and memory utilisation (read every
// ProcUtilPeriod) come from the newest sample that has them, no older than
// LatestMaxAge. The result is a copy.
func (c *Collector) Processes() []ProcessSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := append([]ProcessSample(nil), c.current...)
	maxAge := LatestMaxAge.Milliseconds()
	for i := range out {
		p := &out[i]
		h := c.procs[procKey{p.PID, p.Device}]
		if h == nil || p.Valid&(ProcSMUtil|ProcMemUtil) != 0 || h.utilValid == 0 || p.TimeMS-h.utilMS > maxAge {
			continue
		}
		p.SMUtilPct, p.MemUtilPct = h.sm, h.mem
		p.Valid |= h.utilValid
	}
	return out
}

// Devices returns the Sampler's device list, as read when the collector was
// made.
func (c *Collector) Devices() []DeviceInfo { return append([]DeviceInfo(nil), c.devInfo...) }

// Status returns the Sampler's status as of the last tick with the
// collector's counts: ticks sampled, ticks with an error (or panic), the last
// error, the interval.
func (c *Collector) Status() Status {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := c.status
	st.LostDevices = append([]int(nil), st.LostDevices...)
	st.IntervalMS = c.opts.Interval.Milliseconds()
	st.Samples = c.samples
	st.Errors = c.errs
	st.DroppedProcessSamples = c.dropped
	if c.lastErr != "" {
		st.LastError = c.lastErr
	}
	return st
}
