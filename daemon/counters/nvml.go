//go:build cgo

package counters

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Open loads the driver's libnvidia-ml.so.1 (dynamically, at run time) and
// returns a Sampler over every GPU it lists. Without a driver it returns a
// Sampler that never touches the library, with Status.Available false and the
// reason; it never fails otherwise.
func Open() (Sampler, Status) {
	return openWith(func() nvml.Interface { return nvml.New() })
}

// openWith guards the binding's constructor, which panicking or returning
// nil must not take the process down.
func openWith(newLib func() nvml.Interface) (Sampler, Status) {
	lib, err := func() (lib nvml.Interface, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p)
			}
		}()
		return newLib(), nil
	}()
	if err != nil || lib == nil {
		if err == nil {
			err = errors.New("no library")
		}
		st := Status{Reason: "NVML binding failed: " + err.Error()}
		return Unavailable(st), st
	}
	return NewNVML(lib)
}

// NewNVML returns a Sampler over lib, which may be the real library or a
// simulated one (github.com/NVIDIA/go-nvml/pkg/nvml/mock/...).
//
// If lib.Init fails, no other method of lib is ever called — not even
// Shutdown: after a failed Init the real binding has no library loaded and
// any call jumps to an unresolved symbol, which kills the process. The
// returned Sampler then has no devices and Status says why.
func NewNVML(lib nvml.Interface) (Sampler, Status) {
	if lib == nil {
		st := Status{Reason: "NVML binding failed: no library"}
		return Unavailable(st), st
	}
	ret, err := func() (ret nvml.Return, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p)
			}
		}()
		return lib.Init(), nil
	}()
	if err != nil {
		st := Status{Reason: "NVML Init panicked: " + err.Error()}
		return Unavailable(st), st
	}
	if ret != nvml.SUCCESS {
		st := Status{Reason: initReason(ret)}
		return Unavailable(st), st
	}
	s := &nvmlSampler{lib: lib, slowEvery: SlowPeriod, procUtilEvery: ProcUtilPeriod, pcieEvery: PCIeSlowPeriod}
	s.open()
	return s, s.Status()
}

// initReason explains a failed Init without asking the library (its
// ErrorString is a call into it too).
func initReason(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "no NVIDIA driver (libnvidia-ml.so not found)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "no NVIDIA driver (libnvidia-ml.so found, but the kernel driver is not loaded)"
	case nvml.ERROR_NO_PERMISSION:
		return "NVML Init: no permission to open the GPU devices (/dev/nvidia*)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "NVIDIA driver/library version mismatch (libnvidia-ml.so does not match the loaded kernel module: reload it or reboot)"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return "libnvidia-ml.so too old (nvmlInit missing)"
	}
	return fmt.Sprintf("NVML Init failed (%s)", retName(ret))
}

// retName names a return code without calling into the library.
func retName(ret nvml.Return) string {
	if n, ok := retNames[ret]; ok {
		return n
	}
	return fmt.Sprintf("NVML return %d", int32(ret))
}

var retNames = map[nvml.Return]string{
	nvml.SUCCESS:             "SUCCESS",
	nvml.ERROR_UNINITIALIZED: "ERROR_UNINITIALIZED", nvml.ERROR_INVALID_ARGUMENT: "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED: "ERROR_NOT_SUPPORTED", nvml.ERROR_NO_PERMISSION: "ERROR_NO_PERMISSION",
	nvml.ERROR_NOT_FOUND: "ERROR_NOT_FOUND", nvml.ERROR_INSUFFICIENT_SIZE: "ERROR_INSUFFICIENT_SIZE",
	nvml.ERROR_DRIVER_NOT_LOADED: "ERROR_DRIVER_NOT_LOADED", nvml.ERROR_TIMEOUT: "ERROR_TIMEOUT",
	nvml.ERROR_LIBRARY_NOT_FOUND: "ERROR_LIBRARY_NOT_FOUND", nvml.ERROR_FUNCTION_NOT_FOUND: "ERROR_FUNCTION_NOT_FOUND",
	nvml.ERROR_GPU_IS_LOST: "ERROR_GPU_IS_LOST", nvml.ERROR_RESET_REQUIRED: "ERROR_RESET_REQUIRED",
	nvml.ERROR_OPERATING_SYSTEM: "ERROR_OPERATING_SYSTEM", nvml.ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH",
	nvml.ERROR_MEMORY: "ERROR_MEMORY", nvml.ERROR_NO_DATA: "ERROR_NO_DATA", nvml.ERROR_GPU_NOT_FOUND: "ERROR_GPU_NOT_FOUND",
	nvml.ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH", nvml.ERROR_UNKNOWN: "ERROR_UNKNOWN",
}

// The GPM metrics asked for each tick, in this order.
var gpmMetrics = [...]nvml.GpmMetricId{
	nvml.GPM_METRIC_SM_UTIL,
	nvml.GPM_METRIC_SM_OCCUPANCY,
	nvml.GPM_METRIC_ANY_TENSOR_UTIL,
	nvml.GPM_METRIC_DRAM_BW_UTIL,
	nvml.GPM_METRIC_PCIE_TX_PER_SEC, // MiB/s
	nvml.GPM_METRIC_PCIE_RX_PER_SEC,
}

var gpmFields = [...]Fields{FieldGPMSMActive, FieldGPMSMOccupancy, FieldGPMTensorActive, FieldGPMDRAMBW, FieldPCIeTx, FieldPCIeRx}

// nvmlValueNotAvailable is NVML_VALUE_NOT_AVAILABLE, what UsedGpuMemory holds
// when the driver will not say (some containers, Windows WDDM).
const nvmlValueNotAvailable = math.MaxUint64

// nvmlSampler samples every GPU through NVML. Its methods lock mu, so the
// Collector's goroutine and a caller of Status may overlap.
type nvmlSampler struct {
	lib nvml.Interface
	ext nvml.ExtendedInterface // symbol look-up; nil when the library cannot say

	mu     sync.Mutex
	status Status
	devs   []*nvmlDev
	infos  []DeviceInfo
	out    []DeviceSample
	procs  []ProcessSample
	mg     nvml.GpmMetricsGetType // 19 KB, reused by every GPM read
	pcieRR int                    // round-robin cursor of the slow PCIe read
	closed bool

	// The schedule (see the package comment); tests shorten it.
	slowEvery, procUtilEvery, pcieEvery time.Duration
	nextPCIe                            int64 // unix ms: when the next slow PCIe read is due

	// Symbols newer than the oldest drivers: calling one the library lacks
	// would crash, so each is looked up once.
	hasMemV2, hasArch, hasCC, hasGPM, hasProcUtil, hasPCIe bool
}

type nvmlDev struct {
	h     nvml.Device
	index int
	uuid  string
	memV2 bool   // GetMemoryInfo_v2 answers
	skip  Fields // metrics that answered NOT_SUPPORTED: not asked again
	lost  bool

	noProcs    bool // GetComputeRunningProcesses answered NOT_SUPPORTED
	noProcUtil bool
	lastProcTS uint64 // newest GetProcessUtilization timestamp seen (µs)
	util       []nvml.ProcessUtilizationSample

	gpm      [2]nvml.GpmSample // both nil when GPM is off
	gpmNext  int               // which of gpm the next tick fills
	gpmReady bool              // the other one holds the previous tick
	gpmPCIe  bool              // GPM reported PCIe: the slow call is not needed
	gpmRead  bool              // GpmMetricsGet has answered at least once
	gpmVal   GPMSample         // what this tick's DeviceSample.GPM points to

	nextSlow     int64 // unix ms: when the slow tier is due next
	nextProcUtil int64 // unix ms: when GetProcessUtilization is due next

	failed   nvml.Return // first lost-GPU or library-wide failure this tick
	panicked string      // the first panic of a call this tick
}

func (s *nvmlSampler) has(sym string) bool {
	if s.ext == nil {
		return true
	}
	return s.ext.LookupSymbol(sym) == nil
}

// open reads the versions and every GPU's static information, and sets up
// GPM. Init has succeeded, so every call is allowed (and Close shuts down).
func (s *nvmlSampler) open() {
	s.status.Available = true
	defer func() {
		if p := recover(); p != nil {
			s.status.Available = false
			s.status.Reason = fmt.Sprintf("NVML panicked while listing GPUs: %v", p)
			s.devs, s.infos = nil, nil
		}
	}()
	lib := s.lib
	func() {
		defer func() { _ = recover() }() // a library without Extensions: assume every symbol
		s.ext = lib.Extensions()
	}()
	s.hasMemV2 = s.has("nvmlDeviceGetMemoryInfo_v2")
	s.hasArch = s.has("nvmlDeviceGetArchitecture")
	s.hasCC = s.has("nvmlDeviceGetCudaComputeCapability")
	s.hasProcUtil = s.has("nvmlDeviceGetProcessUtilization")
	s.hasPCIe = s.has("nvmlDeviceGetPcieThroughput")
	s.hasGPM = s.has("nvmlGpmQueryDeviceSupport") && s.has("nvmlGpmSampleAlloc") &&
		s.has("nvmlGpmSampleGet") && s.has("nvmlGpmMetricsGet") && s.has("nvmlGpmSampleFree")

	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		s.status.DriverVersion = v
	}
	if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		s.status.NVMLVersion = v
	}
	if s.has("nvmlSystemGetCudaDriverVersion") {
		if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
			s.status.CUDADriverVersion = v
		}
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.status.Available = false
		s.status.Reason = "NVML DeviceGetCount: " + retName(ret)
		return
	}
	s.status.DeviceCount = n
	for i := 0; i < n; i++ {
		if err := s.openDevice(i); err != nil {
			s.status.LastError = err.Error()
		}
	}
}

func (s *nvmlSampler) openDevice(i int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("GPU %d: NVML panicked: %v", i, p)
		}
	}()
	h, ret := s.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d: DeviceGetHandleByIndex: %s", i, retName(ret))
	}
	d := &nvmlDev{h: h, index: i, memV2: s.hasMemV2, noProcUtil: !s.hasProcUtil}
	if !s.hasPCIe {
		d.skip |= FieldPCIeTx | FieldPCIeRx
	}
	info := DeviceInfo{Index: i}
	d.call(func() (r nvml.Return) { info.Name, r = h.GetName(); return })
	d.call(func() (r nvml.Return) { info.UUID, r = h.GetUUID(); return })
	d.uuid = info.UUID
	d.call(func() (r nvml.Return) {
		m, r := h.GetMemoryInfo()
		info.MemoryTotalBytes = m.Total
		return r
	})
	if s.hasArch {
		d.call(func() (r nvml.Return) {
			a, r := h.GetArchitecture()
			if r == nvml.SUCCESS {
				info.Architecture = archName(a)
			}
			return r
		})
	}
	if s.hasCC {
		d.call(func() (r nvml.Return) {
			major, minor, r := h.GetCudaComputeCapability()
			if r == nvml.SUCCESS {
				info.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
			}
			return r
		})
	}
	d.call(func() (r nvml.Return) {
		p, r := h.GetPciInfo()
		if r == nvml.SUCCESS {
			info.PCIBusID = cString(p.BusId[:])
			if info.PCIBusID == "" {
				info.PCIBusID = cString(p.BusIdLegacy[:])
			}
		}
		return r
	})
	if s.hasGPM {
		info.GPM = s.openGPM(d)
	}
	d.panicked = "" // what the static reads lacked is not a sampling problem
	s.devs = append(s.devs, d)
	s.infos = append(s.infos, info)
	return nil
}

// openGPM allocates d's two GPM samples when the GPU supports GPM.
func (s *nvmlSampler) openGPM(d *nvmlDev) bool {
	var sup nvml.GpmSupport
	if d.call(func() (r nvml.Return) { sup, r = d.h.GpmQueryDeviceSupport(); return }) != nvml.SUCCESS || sup.IsSupportedDevice == 0 {
		return false
	}
	for k := range d.gpm {
		var g nvml.GpmSample
		if d.call(func() (r nvml.Return) { g, r = s.lib.GpmSampleAlloc(); return }) != nvml.SUCCESS || g == nil {
			freeGPM(d)
			return false
		}
		d.gpm[k] = g
	}
	return true
}

// call runs one NVML read and returns its result. A panic — a simulated
// library without the method, or a bug in the binding — counts as
// NOT_SUPPORTED (the metric is not asked again) and is remembered for Status.
func (d *nvmlDev) call(read func() nvml.Return) (ret nvml.Return) {
	defer func() {
		if p := recover(); p != nil {
			ret = nvml.ERROR_NOT_SUPPORTED
			if d.panicked == "" {
				d.panicked = fmt.Sprint(p)
			}
		}
	}()
	return read()
}

func freeGPM(d *nvmlDev) {
	for k, g := range d.gpm {
		if g != nil {
			func() {
				defer func() { _ = recover() }()
				g.Free()
			}()
		}
		d.gpm[k] = nil
	}
	d.gpmReady = false
}

func archName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	case nvml.DEVICE_ARCH_UNKNOWN:
		return ""
	}
	return fmt.Sprintf("arch %d", uint32(a))
}

func cString(b []int8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(b[i])
	}
	return string(out)
}

func (s *nvmlSampler) Devices() []DeviceInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DeviceInfo(nil), s.infos...)
}

func (s *nvmlSampler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.LostDevices = append([]int(nil), st.LostDevices...)
	return st
}

func (s *nvmlSampler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, d := range s.devs {
		freeGPM(d)
	}
	func() {
		defer func() { _ = recover() }()
		s.lib.Shutdown()
	}()
	s.out, s.procs = nil, nil
}

// Sample reads every GPU that is not lost: memory and the process list on
// every call, the slow tier when due (see the package comment). GPM supplies
// PCIe throughput where it can; elsewhere GetPcieThroughput, which blocks for
// 20 ms and costs 1 ms of CPU, reads one (GPU, direction) per
// PCIeSlowPeriod, round robin, and PCIe is no data on the other ticks.
func (s *nvmlSampler) Sample(now time.Time) ([]DeviceSample, []ProcessSample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.status.Available {
		return nil, nil, nil
	}
	ms := now.UnixMilli()
	s.out, s.procs = s.out[:0], s.procs[:0]
	var slowDev *nvmlDev
	var slowField Fields
	if ms >= s.nextPCIe-scheduleSlack {
		if slowDev, slowField = s.nextSlowPCIe(); slowDev != nil {
			s.nextPCIe = ms + s.pcieEvery.Milliseconds()
		}
	}
	var errs []error
	for _, d := range s.devs {
		if d.lost {
			continue
		}
		pcie := Fields(0)
		if d == slowDev {
			pcie = slowField
		}
		if err := s.sampleDevice(d, ms, pcie); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		s.status.LastError = err.Error()
		return s.out, s.procs, err
	}
	return s.out, s.procs, nil
}

// nextSlowPCIe picks the (GPU, direction) whose PCIe throughput is read the
// slow way this tick, if any needs it.
func (s *nvmlSampler) nextSlowPCIe() (*nvmlDev, Fields) {
	n := 2 * len(s.devs)
	for k := 0; k < n; k++ {
		i := (s.pcieRR + k) % n
		d, f := s.devs[i/2], FieldPCIeTx
		if i%2 == 1 {
			f = FieldPCIeRx
		}
		// A GPU with GPM gets PCIe from it; the slow call is for the others,
		// or for one whose GPM has been read without PCIe.
		if d.lost || d.skip&f != 0 || (d.gpm[0] != nil && (!d.gpmRead || d.gpmPCIe)) {
			continue
		}
		s.pcieRR = (i + 1) % n
		return d, f
	}
	return nil, 0
}

// ok reports whether a call for metric f succeeded. NOT_SUPPORTED marks f
// as never to be asked again; a lost GPU or a broken library is remembered in
// d.failed; anything else (NOT_FOUND, NO_DATA, …) is no data this tick.
func (d *nvmlDev) ok(f Fields, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		d.skip |= f
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_GPU_NOT_FOUND, nvml.ERROR_RESET_REQUIRED,
		nvml.ERROR_UNINITIALIZED, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		if d.failed == nvml.SUCCESS {
			d.failed = ret
		}
	}
	return false
}

func (d *nvmlDev) want(f Fields) bool { return d.skip&f == 0 }

func (s *nvmlSampler) sampleDevice(d *nvmlDev, ms int64, slowPCIe Fields) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("GPU %d: NVML call panicked: %v", d.index, p)
		}
	}()
	d.failed = nvml.SUCCESS
	h := d.h
	ds := DeviceSample{TimeMS: ms, Device: d.index, UUID: d.uuid}

	s.readMemory(d, &ds)
	if slow := ms >= d.nextSlow-scheduleSlack; slow {
		d.nextSlow = ms + s.slowEvery.Milliseconds()
		s.readSlow(d, &ds)
	}
	if slowPCIe != 0 && d.want(slowPCIe) {
		counter, dst := nvml.PCIE_UTIL_TX_BYTES, &ds.PCIeTxKBps
		if slowPCIe == FieldPCIeRx {
			counter, dst = nvml.PCIE_UTIL_RX_BYTES, &ds.PCIeRxKBps
		}
		if d.ok(slowPCIe, d.call(func() (r nvml.Return) { *dst, r = h.GetPcieThroughput(counter); return })) {
			ds.Valid |= slowPCIe
		} else {
			*dst = 0
		}
	}
	s.readProcesses(d, ms)
	if d.panicked != "" {
		s.status.LastError = fmt.Sprintf("GPU %d: an NVML call panicked (treated as not supported): %s", d.index, d.panicked)
		d.panicked = ""
	}

	switch d.failed {
	case nvml.SUCCESS:
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_GPU_NOT_FOUND, nvml.ERROR_RESET_REQUIRED:
		d.lost = true
		freeGPM(d)
		s.status.LostDevices = append(s.status.LostDevices, d.index)
		return fmt.Errorf("GPU %d (%s): %s: no longer sampled", d.index, d.uuid, retName(d.failed))
	default: // the library is in trouble; what did answer is still good
		s.out = append(s.out, ds)
		return fmt.Errorf("GPU %d (%s): %s", d.index, d.uuid, retName(d.failed))
	}
	s.out = append(s.out, ds)
	return nil
}

// readSlow reads the slow tier: utilisation, power, temperature, SM clock
// and GPM (whose metrics span the time since the previous slow tick).
func (s *nvmlSampler) readSlow(d *nvmlDev, ds *DeviceSample) {
	h := d.h
	if d.want(FieldUtilGPU) {
		var u nvml.Utilization
		if d.ok(FieldUtilGPU|FieldUtilMem, d.call(func() (r nvml.Return) { u, r = h.GetUtilizationRates(); return })) {
			ds.UtilGPUPct, ds.UtilMemPct = u.Gpu, u.Memory
			ds.Valid |= FieldUtilGPU | FieldUtilMem
		}
	}
	var v uint32
	if d.want(FieldPower) && d.ok(FieldPower, d.call(func() (r nvml.Return) { v, r = h.GetPowerUsage(); return })) {
		ds.PowerMW, ds.Valid = v, ds.Valid|FieldPower
	}
	if d.want(FieldTemp) && d.ok(FieldTemp, d.call(func() (r nvml.Return) { v, r = h.GetTemperature(nvml.TEMPERATURE_GPU); return })) {
		ds.TempC, ds.Valid = v, ds.Valid|FieldTemp
	}
	if d.want(FieldSMClock) && d.ok(FieldSMClock, d.call(func() (r nvml.Return) { v, r = h.GetClockInfo(nvml.CLOCK_SM); return })) {
		ds.SMClockMHz, ds.Valid = v, ds.Valid|FieldSMClock
	}
	if d.gpm[0] != nil {
		s.readGPM(d, ds)
	}
}

func (s *nvmlSampler) readMemory(d *nvmlDev, ds *DeviceSample) {
	if !d.want(FieldMemUsed) {
		return
	}
	if d.memV2 {
		var m nvml.Memory_v2
		switch ret := d.call(func() (r nvml.Return) { m, r = d.h.GetMemoryInfo_v2(); return }); ret {
		case nvml.SUCCESS:
			ds.MemUsedBytes, ds.MemTotalBytes, ds.MemReservedBytes = m.Used, m.Total, m.Reserved
			ds.Valid |= FieldMemUsed | FieldMemTotal | FieldMemReserved
			return
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
			d.memV2 = false // fall back to v1, for good
		default:
			d.ok(0, ret)
			return
		}
	}
	var m nvml.Memory
	if d.ok(FieldMemUsed|FieldMemTotal, d.call(func() (r nvml.Return) { m, r = d.h.GetMemoryInfo(); return })) {
		ds.MemUsedBytes, ds.MemTotalBytes = m.Used, m.Total
		ds.Valid |= FieldMemUsed | FieldMemTotal
	}
}

// readGPM takes this tick's GPM sample and computes the metrics between the
// previous tick's and it.
func (s *nvmlSampler) readGPM(d *nvmlDev, ds *DeviceSample) {
	cur := d.gpm[d.gpmNext]
	ret := d.call(func() nvml.Return { return d.h.GpmSampleGet(cur) })
	if ret != nvml.SUCCESS {
		d.gpmReady = false
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND {
			freeGPM(d) // GPM off for good
		} else {
			d.ok(0, ret)
		}
		return
	}
	prev := d.gpm[1-d.gpmNext]
	ready := d.gpmReady
	d.gpmNext, d.gpmReady = 1-d.gpmNext, true
	if !ready {
		return
	}
	mg := &s.mg
	mg.Sample1, mg.Sample2 = prev, cur
	mg.NumMetrics = uint32(len(gpmMetrics))
	for i, id := range gpmMetrics {
		mg.Metrics[i] = nvml.GpmMetric{MetricId: uint32(id)}
	}
	ret = d.call(func() nvml.Return { return s.lib.GpmMetricsGet(mg) })
	mg.Sample1, mg.Sample2 = nil, nil
	if ret != nvml.SUCCESS {
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND {
			freeGPM(d)
		}
		d.ok(0, ret)
		return
	}
	d.gpmRead = true
	g := &d.gpmVal
	*g = GPMSample{}
	for i, f := range gpmFields {
		m := &mg.Metrics[i]
		v := m.Value
		if nvml.Return(m.NvmlReturn) != nvml.SUCCESS || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			continue
		}
		ds.Valid |= f
		switch f {
		case FieldGPMSMActive:
			g.SMActivePct = v
		case FieldGPMSMOccupancy:
			g.SMOccupancyPct = v
		case FieldGPMTensorActive:
			g.TensorActivePct = v
		case FieldGPMDRAMBW:
			g.DRAMBWUtilPct = v
		case FieldPCIeTx, FieldPCIeRx:
			kbps := uint32(min(math.Round(v*1024), math.MaxUint32)) // MiB/s -> KiB/s
			if f == FieldPCIeTx {
				ds.PCIeTxKBps = kbps
			} else {
				ds.PCIeRxKBps = kbps
			}
			d.gpmPCIe = true
		}
	}
	if ds.Valid&FieldsGPM != 0 {
		ds.GPM = g
	}
}

// readProcesses lists the compute processes on d with their memory, and
// their SM and memory utilisation when NVML has a sample for them
// (GetProcessUtilization answers NOT_FOUND when it has none: no data).
func (s *nvmlSampler) readProcesses(d *nvmlDev, ms int64) {
	if d.noProcs {
		return
	}
	var list []nvml.ProcessInfo
	ret := d.call(func() (r nvml.Return) { list, r = d.h.GetComputeRunningProcesses(); return })
	if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND {
		d.noProcs = true
	}
	if !d.ok(0, ret) || len(list) == 0 {
		return
	}
	d.util = d.util[:0]
	if !d.noProcUtil && ms >= d.nextProcUtil-scheduleSlack {
		// 2.5 ms of CPU per call on an H200, even when it has nothing:
		// every ProcUtilPeriod only. NVML keeps the samples in between.
		d.nextProcUtil = ms + s.procUtilEvery.Milliseconds()
		var u []nvml.ProcessUtilizationSample
		switch ret := d.call(func() (r nvml.Return) { u, r = d.h.GetProcessUtilization(d.lastProcTS); return }); ret {
		case nvml.SUCCESS:
			d.util = append(d.util, u...)
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
			d.noProcUtil = true
		default: // NOT_FOUND: no sample since lastProcTS
			d.ok(0, ret)
		}
	}
	for _, u := range d.util {
		d.lastProcTS = max(d.lastProcTS, u.TimeStamp)
	}
	for _, p := range list {
		ps := ProcessSample{TimeMS: ms, Device: d.index, PID: p.Pid}
		if p.UsedGpuMemory != nvmlValueNotAvailable {
			ps.UsedBytes, ps.Valid = p.UsedGpuMemory, ProcUsed
		}
		// The newest utilisation sample of this pid, if any.
		var best *nvml.ProcessUtilizationSample
		for k := range d.util {
			if u := &d.util[k]; u.Pid == p.Pid && (best == nil || u.TimeStamp > best.TimeStamp) {
				best = u
			}
		}
		if best != nil {
			ps.SMUtilPct, ps.MemUtilPct = best.SmUtil, best.MemUtil
			ps.Valid |= ProcSMUtil | ProcMemUtil
		}
		s.procs = append(s.procs, ps)
	}
}
