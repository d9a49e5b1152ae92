//go:build cgo

package counters

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The simulated machines (pkg/nvml/mock/server) answer Init/Shutdown, the
// versions, the device count and handles, and per device: name, UUID, brand,
// architecture, CUDA compute capability, GetMemoryInfo (v1, used and free 0),
// GetPciInfo (device id only, no bus id) and MIG. Every other method panics
// ("method is nil"). simulate fills in the rest of what the sampler reads,
// on the mock's own Func fields; the tests compare the sampler's output with
// what those mocks return.

// simGPM is a GPM sample of the simulation: the device and tick it was taken on.
type simGPM struct {
	dev, seq int
	freed    bool
}

func (g *simGPM) Free() nvml.Return                   { g.freed = true; return nvml.SUCCESS }
func (g *simGPM) Get(nvml.Device) nvml.Return         { return nvml.ERROR_NOT_SUPPORTED }
func (g *simGPM) MigGet(nvml.Device, int) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }

// gpmValue is the simulated GPM metric between two samples of one device.
func gpmValue(id nvml.GpmMetricId, dev, seq1, seq2 int) float64 {
	return float64(id) + float64(dev)/4 + float64(seq2-seq1)/8
}

type sim struct {
	srv     *server.Server
	mu      sync.Mutex
	seq     int
	allocs  []*simGPM
	pcie    map[[2]int]int // (device, counter) -> GetPcieThroughput calls
	lastTS  []uint64       // GetProcessUtilization's argument, device 0
	procs   map[int][]nvml.ProcessInfo
	utilRet nvml.Return // what GetProcessUtilization answers besides samples
}

func dev(srv *server.Server, i int) *server.Device { return srv.Devices[i].(*server.Device) }

func simulate(srv *server.Server) *sim {
	s := &sim{srv: srv, pcie: map[[2]int]int{}, utilRet: nvml.SUCCESS, procs: map[int][]nvml.ProcessInfo{
		0: {{Pid: 1000, UsedGpuMemory: 4 << 30}, {Pid: 1001, UsedGpuMemory: math.MaxUint64}},
		3: {{Pid: 1000, UsedGpuMemory: 1 << 30}},
	}}
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		g := &simGPM{dev: -1}
		s.allocs = append(s.allocs, g)
		return g, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(mg *nvml.GpmMetricsGetType) nvml.Return {
		a, b := mg.Sample1.(*simGPM), mg.Sample2.(*simGPM)
		if a.dev != b.dev || a.seq >= b.seq {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		for i := 0; i < int(mg.NumMetrics); i++ {
			m := &mg.Metrics[i]
			m.Value = gpmValue(nvml.GpmMetricId(m.MetricId), a.dev, a.seq, b.seq)
			if nvml.GpmMetricId(m.MetricId) == nvml.GPM_METRIC_SM_OCCUPANCY && a.dev == 2 {
				m.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED) // one metric missing on GPU 2
			}
		}
		return nvml.SUCCESS
	}
	for i := range srv.Devices {
		d := dev(srv, i)
		i := i
		d.MemoryInfo.Used = uint64(i+1) << 30
		d.MemoryInfo.Free = d.MemoryInfo.Total - d.MemoryInfo.Used
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			if i == 7 {
				return nvml.Memory_v2{}, nvml.ERROR_ARGUMENT_VERSION_MISMATCH // an old driver: v1 it is
			}
			m := d.MemoryInfo
			return nvml.Memory_v2{Total: m.Total, Reserved: 512 << 20, Used: m.Used, Free: m.Free - 512<<20}, nvml.SUCCESS
		}
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			p := nvml.PciInfo{PciDeviceId: d.Config.PciDeviceId}
			for k, c := range d.PciBusID {
				p.BusId[k] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(3 * i)}, nvml.SUCCESS
		}
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(300_000 + 1_000*i), nvml.SUCCESS }
		d.GetTemperatureFunc = func(t nvml.TemperatureSensors) (uint32, nvml.Return) {
			if t != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(40 + i), nvml.SUCCESS
		}
		d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
			if c != nvml.CLOCK_SM {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(1500 + 10*i), nvml.SUCCESS
		}
		d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
			s.mu.Lock()
			s.pcie[[2]int{i, int(c)}]++
			s.mu.Unlock()
			return uint32(1000*i + int(c)), nvml.SUCCESS
		}
		d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			ok := uint32(0)
			if d.Config.Architecture >= nvml.DEVICE_ARCH_HOPPER {
				ok = 1
			}
			return nvml.GpmSupport{IsSupportedDevice: ok}, nvml.SUCCESS
		}
		d.GpmSampleGetFunc = func(g nvml.GpmSample) nvml.Return {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.seq++
			g.(*simGPM).dev, g.(*simGPM).seq = i, s.seq
			return nvml.SUCCESS
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return append([]nvml.ProcessInfo(nil), s.procs[i]...), nvml.SUCCESS
		}
		d.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if i != 0 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			s.lastTS = append(s.lastTS, last)
			if s.utilRet != nvml.SUCCESS {
				return nil, s.utilRet
			}
			// Two samples of pid 1000 (the newer counts), none of 1001.
			return []nvml.ProcessUtilizationSample{
				{Pid: 1000, TimeStamp: last + 10, SmUtil: 70, MemUtil: 30},
				{Pid: 1000, TimeStamp: last + 5, SmUtil: 1, MemUtil: 1},
			}, nvml.SUCCESS
		}
	}
	return s
}

func mustOpen(t *testing.T, lib nvml.Interface) *nvmlSampler {
	t.Helper()
	smp, st := NewNVML(lib)
	if !st.Available {
		t.Fatalf("not available: %+v", st)
	}
	t.Cleanup(smp.Close)
	return smp.(*nvmlSampler)
}

// everyTick puts the whole slow tier, process utilisation and the slow PCIe
// read on every Sample call.
func everyTick(s *nvmlSampler) *nvmlSampler {
	s.slowEvery, s.procUtilEvery, s.pcieEvery = 0, 0, 0
	return s
}

func TestSimulatedH200Devices(t *testing.T) {
	srv := dgxh200.New() // as simulated: nothing added
	smp := mustOpen(t, srv)
	st := smp.Status()
	if st.DeviceCount != 8 || st.DriverVersion != srv.DriverVersion || st.NVMLVersion != srv.NvmlVersion ||
		st.CUDADriverVersion != srv.CudaDriverVersion || st.Reason != "" {
		t.Errorf("status %+v", st)
	}
	devs := smp.Devices()
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	uuids := map[string]bool{}
	for i, info := range devs {
		d := dev(srv, i)
		name, _ := d.GetName()
		uuid, _ := d.GetUUID()
		mem, _ := d.GetMemoryInfo()
		major, minor, _ := d.GetCudaComputeCapability()
		want := DeviceInfo{Index: i, Name: name, UUID: uuid, MemoryTotalBytes: mem.Total,
			Architecture: "Hopper", ComputeCapability: string(rune('0'+major)) + "." + string(rune('0'+minor))}
		if info != want {
			t.Errorf("device %d: %+v, want %+v", i, info, want)
		}
		uuids[info.UUID] = true
	}
	if len(uuids) != 8 || !strings.HasPrefix(devs[0].UUID, "GPU-") || !strings.Contains(devs[0].Name, "H200") {
		t.Errorf("UUIDs not distinct or not simulated: %+v", devs)
	}

	// Sampling the bare simulation: memory (v1, as it has no v2) and
	// nothing else — the methods it lacks are no data, not errors.
	ds, ps, err := smp.Sample(time.UnixMilli(5000))
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	if len(ds) != 8 || len(ps) != 0 {
		t.Fatalf("%d device samples, %d process samples", len(ds), len(ps))
	}
	for i, s := range ds {
		mem, _ := dev(srv, i).GetMemoryInfo()
		want := DeviceSample{TimeMS: 5000, Device: i, UUID: devs[i].UUID, Valid: FieldMemUsed | FieldMemTotal,
			MemUsedBytes: mem.Used, MemTotalBytes: mem.Total}
		if s != want {
			t.Errorf("sample %d: %+v, want %+v", i, s, want)
		}
	}
	if st := smp.Status(); !strings.Contains(st.LastError, "panicked") {
		t.Errorf("the missing methods are not reported: %+v", st)
	}
}

func TestSimulatedH200Samples(t *testing.T) {
	srv := dgxh200.New()
	sm := simulate(srv)
	smp := everyTick(mustOpen(t, srv))
	for i, info := range smp.Devices() {
		if !info.GPM || info.PCIBusID != dev(srv, i).PciBusID {
			t.Errorf("device %d: GPM %v, bus %q, want true and %q", i, info.GPM, info.PCIBusID, dev(srv, i).PciBusID)
		}
	}
	if len(sm.allocs) != 16 {
		t.Errorf("%d GPM samples allocated, want 2 per GPU", len(sm.allocs))
	}

	// Tick 1 primes GPM; tick 2 has the metrics between the two.
	if _, _, err := smp.Sample(time.UnixMilli(1000)); err != nil {
		t.Fatal(err)
	}
	ds, ps, err := smp.Sample(time.UnixMilli(1100))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 8 {
		t.Fatalf("%d samples", len(ds))
	}
	for i, s := range ds {
		d := dev(srv, i)
		u, _ := d.GetUtilizationRates()
		pw, _ := d.GetPowerUsage()
		tc, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
		clk, _ := d.GetClockInfo(nvml.CLOCK_SM)
		if s.TimeMS != 1100 || s.Device != i || s.UUID != d.UUID {
			t.Errorf("device %d: header %+v", i, s)
		}
		if !s.Has(FieldUtilGPU|FieldUtilMem|FieldPower|FieldTemp|FieldSMClock) || s.UtilGPUPct != u.Gpu ||
			s.UtilMemPct != u.Memory || s.PowerMW != pw || s.TempC != tc || s.SMClockMHz != clk {
			t.Errorf("device %d: %+v, want util %+v power %d temp %d clock %d", i, s, u, pw, tc, clk)
		}
		if i == 7 { // GetMemoryInfo_v2 refused: v1, no reserved
			m, _ := d.GetMemoryInfo()
			if s.Has(FieldMemReserved) || !s.Has(FieldMemUsed|FieldMemTotal) || s.MemUsedBytes != m.Used || s.MemTotalBytes != m.Total {
				t.Errorf("device 7 (v1 fallback): %+v, want %+v", s, m)
			}
		} else {
			m, _ := d.GetMemoryInfo_v2()
			if !s.Has(FieldMemUsed|FieldMemTotal|FieldMemReserved) || s.MemUsedBytes != m.Used ||
				s.MemTotalBytes != m.Total || s.MemReservedBytes != m.Reserved {
				t.Errorf("device %d: memory %+v, want %+v", i, s, m)
			}
		}
		// GPM: this tick's sample and the previous one were taken 8 GPM
		// samples apart (one per GPU per tick).
		if s.GPM == nil {
			t.Fatalf("device %d: no GPM", i)
		}
		cur := sm.seq - 7 + i
		prev := cur - 8
		want := GPMSample{
			SMActivePct:     gpmValue(nvml.GPM_METRIC_SM_UTIL, i, prev, cur),
			SMOccupancyPct:  gpmValue(nvml.GPM_METRIC_SM_OCCUPANCY, i, prev, cur),
			TensorActivePct: gpmValue(nvml.GPM_METRIC_ANY_TENSOR_UTIL, i, prev, cur),
			DRAMBWUtilPct:   gpmValue(nvml.GPM_METRIC_DRAM_BW_UTIL, i, prev, cur),
		}
		if i == 2 {
			want.SMOccupancyPct = 0
			if s.Has(FieldGPMSMOccupancy) || !s.Has(FieldGPMSMActive|FieldGPMTensorActive|FieldGPMDRAMBW) {
				t.Errorf("device 2: GPM occupancy answered NOT_SUPPORTED but Valid is %b", s.Valid)
			}
		} else if !s.Has(FieldsGPM) {
			t.Errorf("device %d: GPM fields missing: %b", i, s.Valid)
		}
		if *s.GPM != want {
			t.Errorf("device %d: GPM %+v, want %+v", i, *s.GPM, want)
		}
		// PCIe comes from GPM (MiB/s -> KiB/s), so the 20 ms call is never made.
		tx := uint32(math.Round(gpmValue(nvml.GPM_METRIC_PCIE_TX_PER_SEC, i, prev, cur) * 1024))
		rx := uint32(math.Round(gpmValue(nvml.GPM_METRIC_PCIE_RX_PER_SEC, i, prev, cur) * 1024))
		if !s.Has(FieldPCIeTx|FieldPCIeRx) || s.PCIeTxKBps != tx || s.PCIeRxKBps != rx {
			t.Errorf("device %d: PCIe %d/%d, want %d/%d", i, s.PCIeTxKBps, s.PCIeRxKBps, tx, rx)
		}
	}
	// A GPU with GPM never makes the 20 ms call, not even before its first
	// GPM pair.
	if n := len(sm.pcie); n != 0 {
		t.Errorf("GetPcieThroughput called for %d (GPU, counter) pairs: %v", n, sm.pcie)
	}

	// Processes: GPU 0 lists 1000 (with utilisation) and 1001 (memory
	// hidden, no utilisation sample); GPU 3 lists 1000, whose
	// GetProcessUtilization answers NOT_FOUND.
	want := []ProcessSample{
		{TimeMS: 1100, Device: 0, PID: 1000, Valid: ProcUsed | ProcSMUtil | ProcMemUtil, UsedBytes: 4 << 30, SMUtilPct: 70, MemUtilPct: 30},
		{TimeMS: 1100, Device: 0, PID: 1001},
		{TimeMS: 1100, Device: 3, PID: 1000, Valid: ProcUsed, UsedBytes: 1 << 30},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("processes\n got %+v\nwant %+v", ps, want)
	}
	// lastSeenTimestamp advances to the newest sample seen.
	if !reflect.DeepEqual(sm.lastTS, []uint64{0, 10}) {
		t.Errorf("GetProcessUtilization called with %v, want [0 10]", sm.lastTS)
	}

	smp.Close()
	for _, g := range sm.allocs {
		if !g.freed {
			t.Errorf("GPM sample not freed on Close")
		}
	}
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times", n)
	}
	if ds, ps, err := smp.Sample(time.Now()); ds != nil || ps != nil || err != nil {
		t.Errorf("Sample after Close: %v %v %v", ds, ps, err)
	}
	smp.Close()
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("second Close shut down again")
	}
}

// TestSchedule: with the default schedule, memory and processes are read
// every tick, the slow tier once a second (GPM between consecutive slow
// ticks), process utilisation every 5 s, and on GPUs without GPM one slow
// PCIe read per second in all.
func TestSchedule(t *testing.T) {
	srv := dgxh200.New()
	sm := simulate(srv)
	smp := mustOpen(t, srv)
	d0 := dev(srv, 0)
	slow := map[int64]bool{0: true, 1000: true, 2000: true, 3000: true}
	var seqAtSlow []int
	for ms := int64(0); ms <= 3000; ms += 100 {
		jitter := int64(0)
		if ms == 2000 {
			jitter = -3 // a tick a little early still gets the slow tier
		}
		ds, ps, err := smp.Sample(time.UnixMilli(ms + jitter))
		if err != nil || len(ds) != 8 {
			t.Fatalf("t=%d: %d samples, %v", ms, len(ds), err)
		}
		s := ds[0]
		if !s.Has(FieldMemUsed|FieldMemTotal|FieldMemReserved) || len(ps) != 3 || !ps[0].Has(ProcUsed) {
			t.Errorf("t=%d: memory or processes missing: %b, %+v", ms, s.Valid, ps)
		}
		tier := FieldUtilGPU | FieldUtilMem | FieldPower | FieldTemp | FieldSMClock
		if got := s.Valid&tier == tier; got != slow[ms] {
			t.Errorf("t=%d: slow tier present %v, want %v (Valid %b)", ms, got, slow[ms], s.Valid)
		}
		if !slow[ms] && s.Valid&^(FieldMemUsed|FieldMemTotal|FieldMemReserved) != 0 {
			t.Errorf("t=%d: fields beyond memory on a fast tick: %b", ms, s.Valid)
		}
		if slow[ms] {
			seqAtSlow = append(seqAtSlow, sm.seq)
		}
		hasGPM := s.GPM != nil && s.Has(FieldsGPM|FieldPCIeTx|FieldPCIeRx)
		if want := slow[ms] && ms > 0; hasGPM != want {
			t.Errorf("t=%d: GPM %v, want %v", ms, hasGPM, want)
		}
		if hasGPM { // over the second since the previous slow tick
			n := len(seqAtSlow)
			prev, cur := seqAtSlow[n-2]-7, seqAtSlow[n-1]-7
			if want := gpmValue(nvml.GPM_METRIC_SM_UTIL, 0, prev, cur); s.GPM.SMActivePct != want {
				t.Errorf("t=%d: SM active %v, want %v (samples %d..%d)", ms, s.GPM.SMActivePct, want, prev, cur)
			}
		}
		if ps[0].Has(ProcSMUtil) != (ms == 0) {
			t.Errorf("t=%d: process utilisation %v", ms, ps[0].Has(ProcSMUtil))
		}
	}
	if n := len(d0.GetPowerUsageCalls()); n != 4 {
		t.Errorf("GetPowerUsage called %d times in 3 s, want 4", n)
	}
	if n := len(d0.GetProcessUtilizationCalls()); n != 1 {
		t.Errorf("GetProcessUtilization called %d times in 3 s, want 1", n)
	}
	if n := len(sm.pcie); n != 0 {
		t.Errorf("slow PCIe read on GPUs with GPM: %v", sm.pcie)
	}
	if ds, _, _ := smp.Sample(time.UnixMilli(5000)); !ds[0].Has(FieldPower) || len(d0.GetProcessUtilizationCalls()) != 2 {
		t.Errorf("t=5000: slow tier %v, process utilisation calls %d", ds[0].Has(FieldPower), len(d0.GetProcessUtilizationCalls()))
	}

	// Without GPM (A100s): one GetPcieThroughput per second in all.
	a := dgxa100.New()
	sa := simulate(a)
	sma := mustOpen(t, a)
	for ms := int64(0); ms < 4000; ms += 100 {
		sma.Sample(time.UnixMilli(ms))
	}
	calls := 0
	for _, n := range sa.pcie {
		calls += n
	}
	if calls != 4 || sa.pcie[[2]int{0, 0}] != 1 || sa.pcie[[2]int{0, 1}] != 1 || sa.pcie[[2]int{1, 0}] != 1 {
		t.Errorf("A100s, 4 s: slow PCIe reads %v", sa.pcie)
	}
}

// wrapLib hands out devs instead of the simulation's own devices.
type wrapLib struct {
	nvml.Interface
	devs []nvml.Device
}

func (w *wrapLib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(w.devs) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return w.devs[i], nvml.SUCCESS
}

// noPower answers NOT_SUPPORTED for power and NOT_FOUND for process
// utilisation, counting the calls.
type noPower struct {
	nvml.Device
	power, util int
}

func (d *noPower) GetPowerUsage() (uint32, nvml.Return) {
	d.power++
	return 0, nvml.ERROR_NOT_SUPPORTED
}
func (d *noPower) GetProcessUtilization(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	d.util++
	return nil, nvml.ERROR_NOT_FOUND
}

func TestNotSupportedIsNoData(t *testing.T) {
	srv := dgxh200.New()
	simulate(srv)
	w := &wrapLib{Interface: srv}
	var wrapped []*noPower
	for i := range srv.Devices {
		d := &noPower{Device: srv.Devices[i]}
		wrapped = append(wrapped, d)
		w.devs = append(w.devs, d)
	}
	smp := everyTick(mustOpen(t, w))
	for tick := int64(1); tick <= 3; tick++ {
		ds, ps, err := smp.Sample(time.UnixMilli(tick * 100))
		if err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		for _, s := range ds {
			if s.Has(FieldPower) || s.PowerMW != 0 {
				t.Errorf("GPU %d: power %d (Valid %b) though NOT_SUPPORTED", s.Device, s.PowerMW, s.Valid)
			}
			if !s.Has(FieldMemUsed | FieldUtilGPU | FieldTemp | FieldSMClock) {
				t.Errorf("GPU %d: other fields lost: %b", s.Device, s.Valid)
			}
		}
		if len(ps) != 3 {
			t.Fatalf("tick %d: %d processes", tick, len(ps))
		}
		for _, p := range ps {
			if p.Has(ProcSMUtil) || p.Has(ProcMemUtil) {
				t.Errorf("pid %d: utilisation though NOT_FOUND: %+v", p.PID, p)
			}
		}
		if p := ps[0]; !p.Has(ProcUsed) || p.UsedBytes != 4<<30 {
			t.Errorf("pid 1000 lost its memory: %+v", p)
		}
	}
	// NOT_SUPPORTED is not asked again; NOT_FOUND is asked every tick.
	if wrapped[0].power != 1 || wrapped[0].util != 3 {
		t.Errorf("GetPowerUsage called %d times (want 1), GetProcessUtilization %d (want 3)", wrapped[0].power, wrapped[0].util)
	}
	if st := smp.Status(); st.LastError != "" || len(st.LostDevices) != 0 {
		t.Errorf("no data reported as an error: %+v", st)
	}
}

// lostGPU fails every reading with GPU_IS_LOST once lost is set.
type lostGPU struct {
	nvml.Device
	lost  bool
	calls int
}

func (d *lostGPU) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	d.calls++
	if d.lost {
		return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
	}
	return d.Device.GetUtilizationRates()
}

func TestLostGPU(t *testing.T) {
	srv := dgxh200.New()
	simulate(srv)
	w := &wrapLib{Interface: srv}
	w.devs = append(w.devs, srv.Devices...)
	lost := &lostGPU{Device: srv.Devices[3]}
	w.devs[3] = lost
	c := NewCollector(everyTick(mustOpen(t, w)), Options{})
	c.tick(time.UnixMilli(100))
	lost.lost = true
	c.tick(time.UnixMilli(200))
	c.tick(time.UnixMilli(300))

	st := c.Status()
	if st.Errors != 1 || !strings.Contains(st.LastError, "GPU 3") || !strings.Contains(st.LastError, "ERROR_GPU_IS_LOST") ||
		!reflect.DeepEqual(st.LostDevices, []int{3}) {
		t.Errorf("status %+v", st)
	}
	if lost.calls != 2 {
		t.Errorf("lost GPU asked %d times, want 2 (not after it was lost)", lost.calls)
	}
	if n := len(c.Latest()); n != 7 {
		t.Errorf("%d GPUs sampled after the loss, want 7", n)
	}
	if got := times(c.Series(3, 0, 0, 0)); !eqInts(got, []int64{100}) {
		t.Errorf("GPU 3 history %v", got)
	}
	if got := times(c.Series(4, 0, 0, 0)); !eqInts(got, []int64{100, 200, 300}) {
		t.Errorf("GPU 4 history %v", got)
	}
}

func TestCollectorOverSimulatedH200(t *testing.T) {
	srv := dgxh200.New()
	sm := simulate(srv)
	smp := everyTick(mustOpen(t, srv))
	c := NewCollector(smp, Options{})
	for tick := int64(1); tick <= 5; tick++ {
		if tick == 4 { // pid 1001 exits, 1002 starts on GPU 5
			sm.mu.Lock()
			sm.procs[0] = sm.procs[0][:1]
			sm.procs[5] = []nvml.ProcessInfo{{Pid: 1002, UsedGpuMemory: 7 << 30}}
			sm.mu.Unlock()
		}
		c.tick(time.UnixMilli(tick * 100))
	}
	if st := c.Status(); st.Samples != 5 || st.Errors != 0 || st.DeviceCount != 8 || !st.Available {
		t.Errorf("status %+v", st)
	}
	if n := len(c.Devices()); n != 8 {
		t.Errorf("%d devices", n)
	}
	latest := c.Latest()
	if len(latest) != 8 || latest[5].UUID != dev(srv, 5).UUID || latest[5].GPM == nil {
		t.Fatalf("latest %+v", latest)
	}
	s := c.Series(5, 0, 0, 0)
	if len(s) != 5 || s[0].GPM != nil || s[1].GPM == nil || s[4].UUID != dev(srv, 5).UUID {
		t.Errorf("GPU 5 series: %d samples, GPM on tick 1 %v / tick 2 %v", len(s), s[0].GPM != nil, s[1].GPM != nil)
	}
	var pids []int64
	for _, p := range c.Processes() {
		pids = append(pids, int64(p.PID))
	}
	if !eqInts(pids, []int64{1000, 1000, 1002}) {
		t.Errorf("Processes() %v, want 1000 (GPU 0), 1000 (GPU 3), 1002 (GPU 5)", pids)
	}
	ps := c.ProcessSeries(1000, 0, 0, 0)
	if len(ps) != 10 || ps[0].Device != 0 || ps[1].Device != 3 || ps[0].UsedBytes != 4<<30 || ps[1].UsedBytes != 1<<30 {
		t.Errorf("pid 1000: %+v", ps)
	}
	if ps := c.ProcessSeries(1001, 0, 0, 0); len(ps) != 3 || ps[2].TimeMS != 300 || ps[0].Has(ProcUsed) {
		t.Errorf("pid 1001 (gone after tick 3): %+v", ps)
	}
	if ps := c.ProcessSeries(1002, 0, 0, 0); len(ps) != 2 || ps[0].TimeMS != 400 || ps[0].UsedBytes != 7<<30 {
		t.Errorf("pid 1002: %+v", ps)
	}
}

// TestSlowPCIeRoundRobin: without GPM (an A100), GetPcieThroughput — 20 ms
// each on real hardware — is read for one (GPU, direction) per tick.
func TestSlowPCIeRoundRobin(t *testing.T) {
	srv := dgxa100.New()
	sm := simulate(srv)
	smp := everyTick(mustOpen(t, srv))
	for _, info := range smp.Devices() {
		if info.GPM || info.Architecture != "Ampere" {
			t.Errorf("A100 device %+v", info)
		}
	}
	for tick := 0; tick < 16; tick++ {
		ds, _, err := smp.Sample(time.UnixMilli(int64(tick)))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		for _, n := range sm.pcie {
			calls += n
		}
		if want := 2*tick + 1; calls != want { // the sampler's, and the test's own below
			t.Fatalf("tick %d: %d GetPcieThroughput calls in all, want %d", tick, calls, want)
		}
		dev, counter := tick/2, tick%2
		for _, s := range ds {
			want := Fields(0)
			if s.Device == dev {
				want = FieldPCIeTx << counter
			}
			if s.Valid&(FieldPCIeTx|FieldPCIeRx) != want || s.GPM != nil {
				t.Errorf("tick %d GPU %d: PCIe valid %b, want %b", tick, s.Device, s.Valid&(FieldPCIeTx|FieldPCIeRx), want)
			}
			if s.Device == dev {
				v, _ := srv.Devices[dev].GetPcieThroughput(nvml.PcieUtilCounter(counter))
				if got := []uint32{s.PCIeTxKBps, s.PCIeRxKBps}[counter]; got != v {
					t.Errorf("tick %d GPU %d: PCIe %d, want %d", tick, dev, got, v)
				}
			}
		}
	}
	for dev := 0; dev < 8; dev++ {
		for c := 0; c < 2; c++ {
			if n := sm.pcie[[2]int{dev, c}]; n != 2 { // once by the sampler, once by the test
				t.Errorf("GPU %d counter %d read %d times", dev, c, n)
			}
		}
	}
}

// strictLib is a mock NVML library whose every method records its name;
// Init returns initRet.
func strictLib(initRet nvml.Return) (*mock.Interface, func() []string) {
	var mu sync.Mutex
	var called []string
	m := &mock.Interface{}
	v := reflect.ValueOf(m).Elem()
	retType := reflect.TypeOf(nvml.Return(0))
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Type.Kind() != reflect.Func || !strings.HasSuffix(f.Name, "Func") {
			continue
		}
		name, ft := strings.TrimSuffix(f.Name, "Func"), f.Type
		v.Field(i).Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			mu.Lock()
			called = append(called, name)
			mu.Unlock()
			out := make([]reflect.Value, ft.NumOut())
			for k := range out {
				out[k] = reflect.Zero(ft.Out(k))
				if ft.Out(k) == retType {
					out[k] = reflect.ValueOf(nvml.ERROR_UNINITIALIZED)
				}
			}
			return out
		}))
	}
	m.InitFunc = func() nvml.Return {
		mu.Lock()
		called = append(called, "Init")
		mu.Unlock()
		return initRet
	}
	return m, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), called...)
	}
}

func TestFailedInitCallsNothingElse(t *testing.T) {
	// The net works: a call to any method is recorded.
	probe, probeCalls := strictLib(nvml.SUCCESS)
	probe.DeviceGetCount()
	probe.Shutdown()
	probe.GpmSampleAlloc()
	if got := probeCalls(); !reflect.DeepEqual(got, []string{"DeviceGetCount", "Shutdown", "GpmSampleAlloc"}) {
		t.Fatalf("strict mock records %v", got)
	}

	for _, tc := range []struct {
		ret    nvml.Return
		reason string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver (libnvidia-ml.so not found)"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "no NVIDIA driver (libnvidia-ml.so found, but the kernel driver is not loaded)"},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "version mismatch"},
		{nvml.ERROR_NO_PERMISSION, "no permission"},
		{nvml.ERROR_UNKNOWN, "NVML Init failed (ERROR_UNKNOWN)"},
	} {
		lib, calls := strictLib(tc.ret)
		smp, st := NewNVML(lib)
		if st.Available || !strings.Contains(st.Reason, tc.reason) {
			t.Errorf("Init %d: status %+v, want unavailable with %q", tc.ret, st, tc.reason)
		}
		// Use it the way the daemon would.
		c := NewCollector(smp, Options{})
		for i := 0; i < 3; i++ {
			c.tick(time.UnixMilli(int64(i)))
		}
		if d, p, err := smp.Sample(time.Now()); d != nil || p != nil || err != nil {
			t.Errorf("Init %d: Sample returned %v %v %v", tc.ret, d, p, err)
		}
		if len(smp.Devices())+len(c.Latest())+len(c.Processes()) != 0 || c.Status().Available {
			t.Errorf("Init %d: the sampler has data", tc.ret)
		}
		smp.Close()
		if got := calls(); !reflect.DeepEqual(got, []string{"Init"}) {
			t.Errorf("Init %d: NVML methods called after a failed Init: %v", tc.ret, got)
		}
	}
}

func TestBindingFailures(t *testing.T) {
	// nvml.New panicking or returning nil, Init panicking: no crash.
	smp, st := openWith(func() nvml.Interface { panic("dlopen exploded") })
	if st.Available || !strings.Contains(st.Reason, "dlopen exploded") || smp == nil {
		t.Errorf("New panics: %+v", st)
	}
	smp, st = openWith(func() nvml.Interface { return nil })
	if st.Available || st.Reason == "" || smp == nil {
		t.Errorf("New returns nil: %+v", st)
	}
	lib := &mock.Interface{InitFunc: func() nvml.Return { panic("init exploded") }}
	smp, st = NewNVML(lib)
	if st.Available || !strings.Contains(st.Reason, "init exploded") {
		t.Errorf("Init panics: %+v", st)
	}
	smp.Close() // must not call Shutdown (its Func is nil: it would panic)
	if len(lib.ShutdownCalls()) != 0 {
		t.Errorf("Shutdown called after a failed Init")
	}
	// DeviceGetCount failing after a good Init: unavailable, and Close shuts down.
	lib2, calls := strictLib(nvml.SUCCESS)
	smp, st = NewNVML(lib2)
	if st.Available || !strings.Contains(st.Reason, "DeviceGetCount") {
		t.Errorf("count fails: %+v", st)
	}
	smp.Close()
	if got := calls(); got[len(got)-1] != "Shutdown" {
		t.Errorf("calls %v: Close after a good Init must shut down", got)
	}
}

// TestOpenOnThisMachine exercises the real dynamic loading: on a machine
// without the NVIDIA driver Open must report it, not crash.
func TestOpenOnThisMachine(t *testing.T) {
	smp, st := Open()
	defer smp.Close()
	if st.Available {
		devs := smp.Devices()
		t.Logf("NVML available: driver %s, %d GPUs", st.DriverVersion, len(devs))
		if st.DeviceCount < 0 || len(devs) > st.DeviceCount {
			t.Errorf("status %+v with %d devices", st, len(devs))
		}
		ds, _, err := smp.Sample(time.Now())
		if err != nil || len(ds) != len(devs) {
			t.Errorf("Sample on real GPUs: %d samples, %v", len(ds), err)
		}
		return
	}
	t.Logf("NVML unavailable: %s", st.Reason)
	if driverLibPresent() {
		if st.Reason == "" {
			t.Errorf("unavailable without a reason")
		}
		return
	}
	if !strings.HasPrefix(st.Reason, "no NVIDIA driver") {
		t.Errorf("no libnvidia-ml on this machine, yet the reason is %q", st.Reason)
	}
	if d, p, err := smp.Sample(time.Now()); d != nil || p != nil || err != nil || smp.Devices() != nil {
		t.Errorf("unavailable sampler sampled")
	}
}

// driverLibPresent looks for libnvidia-ml.so where the dynamic loader would.
func driverLibPresent() bool {
	dirs := []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/lib64",
		"/usr/lib/aarch64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"}
	dirs = append(dirs, filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
	for _, dir := range dirs {
		if m, _ := filepath.Glob(filepath.Join(dir, "libnvidia-ml.so*")); len(m) > 0 {
			return true
		}
	}
	return false
}
