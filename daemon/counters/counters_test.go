package counters

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// fakeSampler returns what its sample function builds; calls counts them.
type fakeSampler struct {
	devs   []DeviceInfo
	st     Status
	calls  atomic.Int64
	sample func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error)
}

func (f *fakeSampler) Devices() []DeviceInfo { return f.devs }
func (f *fakeSampler) Status() Status        { return f.st }
func (f *fakeSampler) Close()                {}
func (f *fakeSampler) Sample(now time.Time) ([]DeviceSample, []ProcessSample, error) {
	return f.sample(f.calls.Add(1), now)
}

// memSampler reports one GPU whose used memory is the tick number times 1 MiB.
func memSampler() *fakeSampler {
	return &fakeSampler{
		devs: []DeviceInfo{{Index: 0, UUID: "GPU-a"}},
		st:   Status{Available: true, DeviceCount: 1},
		sample: func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
			return []DeviceSample{{TimeMS: now.UnixMilli(), Device: 0, UUID: "GPU-a",
				Valid: FieldMemUsed, MemUsedBytes: uint64(n) << 20}}, nil, nil
		},
	}
}

func at(ms int64) time.Time { return time.UnixMilli(ms) }

func times(ss []DeviceSample) []int64 {
	var out []int64
	for _, s := range ss {
		out = append(out, s.TimeMS)
	}
	return out
}

func eqInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRingWrapAround(t *testing.T) {
	c := NewCollector(memSampler(), Options{Capacity: 5})
	for i := int64(1); i <= 12; i++ {
		c.tick(at(i * 100))
	}
	got := c.Series(0, 0, 0, 0)
	if want := []int64{800, 900, 1000, 1100, 1200}; !eqInts(times(got), want) {
		t.Fatalf("after wrapping, times %v, want %v", times(got), want)
	}
	for i, s := range got {
		if want := uint64(8+i) << 20; s.MemUsedBytes != want || !s.Has(FieldMemUsed) || s.UUID != "GPU-a" {
			t.Errorf("sample %d: %+v, want used %d and uuid GPU-a", i, s, want)
		}
		if s.Has(FieldPower) || s.GPM != nil {
			t.Errorf("sample %d has data that was never sampled: %+v", i, s)
		}
	}
	if n := len(c.devs[0].buf); n != 5 {
		t.Errorf("ring holds %d records, capacity 5", n)
	}
}

func TestRangeQuery(t *testing.T) {
	c := NewCollector(memSampler(), Options{Capacity: 100})
	for i := int64(1); i <= 10; i++ {
		c.tick(at(i * 100))
	}
	cases := []struct {
		from, to int64
		want     []int64
	}{
		{300, 500, []int64{300, 400, 500}}, // both ends inclusive
		{250, 549, []int64{300, 400, 500}},
		{900, 0, []int64{900, 1000}}, // to <= 0: no upper bound
		{0, 150, []int64{100}},
		{1001, 0, nil},
		{500, 400, nil},
	}
	for _, tc := range cases {
		if got := times(c.Series(0, tc.from, tc.to, 0)); !eqInts(got, tc.want) {
			t.Errorf("Series(0, %d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	if got := c.Series(1, 0, 0, 0); got != nil {
		t.Errorf("unknown device: %v", got)
	}
	if got := c.Series(-1, 0, 0, 0); got != nil {
		t.Errorf("negative device: %v", got)
	}
}

func TestDownsampleKeepsPeaks(t *testing.T) {
	f := memSampler()
	inner := f.sample
	f.sample = func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		d, p, err := inner(n, now)
		d[0].MemUsedBytes = 1 << 20
		if n == 38 {
			d[0].MemUsedBytes = 1 << 30 // one spike
		}
		return d, p, err
	}
	c := NewCollector(f, Options{Capacity: 1000})
	for i := int64(1); i <= 100; i++ {
		c.tick(at(i * 10))
	}
	got := c.Series(0, 0, 0, 10)
	if len(got) != 10 {
		t.Fatalf("%d points, want 10", len(got))
	}
	spike := 0
	for i, s := range got {
		if i > 0 && s.TimeMS <= got[i-1].TimeMS {
			t.Errorf("not in time order: %v", times(got))
		}
		if s.MemUsedBytes == 1<<30 {
			spike++
			if s.TimeMS != 380 {
				t.Errorf("spike at %d, sampled at 380", s.TimeMS)
			}
		}
	}
	if spike != 1 {
		t.Errorf("the spike appears %d times in %v", spike, times(got))
	}
	// Buckets of 10: with no peak, each keeps its first sample.
	if got[0].TimeMS != 10 || got[9].TimeMS != 910 {
		t.Errorf("bucket representatives %v", times(got))
	}
	if n := len(c.Series(0, 0, 0, 1000)); n != 100 {
		t.Errorf("maxPoints above the count: %d points, want all 100", n)
	}
	if n := len(c.Series(0, 0, 0, 3)); n != 3 {
		t.Errorf("maxPoints 3: %d points", n)
	}
}

func TestProcessRingsBounded(t *testing.T) {
	// running[tick] lists the pids NVML shows on GPU 0 at that tick.
	running := map[int64][]uint32{1: {1, 2, 3}, 2: {1, 2, 3}, 3: {2, 3}, 4: {3}, 5: {3, 4}, 6: {3, 4, 5}, 7: {6, 3, 4, 5}} // 6 listed first: must not push out a running one
	f := &fakeSampler{sample: func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		var ps []ProcessSample
		for _, pid := range running[n] {
			ps = append(ps, ProcessSample{TimeMS: now.UnixMilli(), PID: pid, Valid: ProcUsed, UsedBytes: uint64(pid) << 20})
		}
		return nil, ps, nil
	}}
	c := NewCollector(f, Options{Capacity: 100, ProcessCapacity: 4, MaxProcesses: 3})
	for i := int64(1); i <= 7; i++ {
		c.tick(at(i * 1000))
	}
	// Tick 5: pid 4 is new with 3 tracked; pid 1 (gone since tick 3) is
	// dropped. Tick 6: pid 5 is new; pid 2 (gone since tick 4) is dropped.
	// Tick 7: pid 6 is new, but 3, 4 and 5 are all running: pid 6 is not kept.
	for pid, want := range map[uint32][]int64{1: nil, 2: nil, 3: {4000, 5000, 6000, 7000}, 4: {5000, 6000, 7000}, 5: {6000, 7000}, 6: nil} {
		got := c.ProcessSeries(pid, 0, 0, 0)
		var ts []int64
		for _, p := range got {
			ts = append(ts, p.TimeMS)
			if p.PID != pid || p.UsedBytes != uint64(pid)<<20 || !p.Has(ProcUsed) || p.Has(ProcSMUtil) {
				t.Errorf("pid %d: sample %+v", pid, p)
			}
		}
		if !eqInts(ts, want) {
			t.Errorf("pid %d: times %v, want %v", pid, ts, want)
		}
	}
	if len(c.procs) != 3 {
		t.Errorf("%d process histories, bound 3", len(c.procs))
	}
	if st := c.Status(); st.DroppedProcessSamples != 1 {
		t.Errorf("dropped %d process samples, want 1 (pid 6)", st.DroppedProcessSamples)
	}
	// Processes lists the last tick's, including the one without a history.
	var pids []int64
	for _, p := range c.Processes() {
		pids = append(pids, int64(p.PID))
	}
	if !eqInts(pids, []int64{6, 3, 4, 5}) {
		t.Errorf("Processes() pids %v", pids)
	}
}

func TestProcessSeriesAcrossGPUs(t *testing.T) {
	f := &fakeSampler{sample: func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		ms := now.UnixMilli()
		return nil, []ProcessSample{
			{TimeMS: ms, Device: 1, PID: 7, Valid: ProcUsed | ProcSMUtil | ProcMemUtil, UsedBytes: uint64(n), SMUtilPct: 50, MemUtilPct: 20},
			{TimeMS: ms, Device: 0, PID: 7, Valid: ProcUsed, UsedBytes: uint64(100 + n)},
		}, nil
	}}
	c := NewCollector(f, Options{})
	for i := int64(1); i <= 3; i++ {
		c.tick(at(i * 100))
	}
	got := c.ProcessSeries(7, 200, 0, 0)
	if len(got) != 4 {
		t.Fatalf("%d samples, want 4: %+v", len(got), got)
	}
	want := []ProcessSample{
		{TimeMS: 200, Device: 0, PID: 7, Valid: ProcUsed, UsedBytes: 102},
		{TimeMS: 200, Device: 1, PID: 7, Valid: ProcUsed | ProcSMUtil | ProcMemUtil, UsedBytes: 2, SMUtilPct: 50, MemUtilPct: 20},
		{TimeMS: 300, Device: 0, PID: 7, Valid: ProcUsed, UsedBytes: 103},
		{TimeMS: 300, Device: 1, PID: 7, Valid: ProcUsed | ProcSMUtil | ProcMemUtil, UsedBytes: 3, SMUtilPct: 50, MemUtilPct: 20},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSamplerPanicsAndErrorsAreCounted(t *testing.T) {
	f := memSampler()
	inner := f.sample
	f.sample = func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		switch n {
		case 2, 4:
			panic("boom " + string(rune('0'+n)))
		case 3:
			return nil, nil, errors.New("driver hiccup")
		case 5: // a good sample with an error: a lost GPU beside good ones
			d, p, _ := inner(n, now)
			return d, p, errors.New("GPU 1 lost")
		}
		return inner(n, now)
	}
	c := NewCollector(f, Options{})
	for i := int64(1); i <= 6; i++ {
		c.tick(at(i * 100))
	}
	st := c.Status()
	if st.Samples != 6 || st.Errors != 4 {
		t.Errorf("samples %d errors %d, want 6 and 4", st.Samples, st.Errors)
	}
	if st.LastError != "GPU 1 lost" {
		t.Errorf("last error %q", st.LastError)
	}
	if got := times(c.Series(0, 0, 0, 0)); !eqInts(got, []int64{100, 500, 600}) {
		t.Errorf("stored %v, want the ticks that returned samples: 100 500 600", got)
	}
	// The panic's message reaches the status.
	c.tick(at(700)) // n == 7: fine
	f.sample = func(int64, time.Time) ([]DeviceSample, []ProcessSample, error) { panic("kaput") }
	c.tick(at(800))
	if st := c.Status(); !strings.Contains(st.LastError, "panicked: kaput") || st.Errors != 5 {
		t.Errorf("after a panic: %+v", st)
	}
}

func TestStartStop(t *testing.T) {
	f := memSampler()
	c := NewCollector(f, Options{Interval: 2 * time.Millisecond})
	ticks := make(chan int, 100)
	unsub := c.OnTick(func(s []DeviceSample) {
		select {
		case ticks <- len(s):
		default:
		}
	})
	c.Start(context.Background())
	c.Start(context.Background()) // no second goroutine
	for i := 0; i < 3; i++ {
		select {
		case n := <-ticks:
			if n != 1 {
				t.Errorf("OnTick got %d samples, want 1", n)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no tick within 5s")
		}
	}
	c.Stop()
	calls := f.calls.Load()
	time.Sleep(20 * time.Millisecond)
	if f.calls.Load() != calls {
		t.Errorf("Sample called after Stop returned")
	}
	if st := c.Status(); st.Samples != uint64(calls) || st.IntervalMS != 2 {
		t.Errorf("status %+v after %d calls", st, calls)
	}
	c.Stop() // idempotent

	// Cancelling the context also ends it; Stop then returns at once.
	unsub()
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	cancel()
	done := make(chan struct{})
	go func() { c.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop hangs after the context ended")
	}
}

func TestOnTickPanicAndUnsubscribe(t *testing.T) {
	c := NewCollector(memSampler(), Options{})
	var mu sync.Mutex
	var got []int64
	unsub := c.OnTick(func(s []DeviceSample) {
		mu.Lock()
		got = append(got, s[0].TimeMS)
		mu.Unlock()
	})
	c.OnTick(func([]DeviceSample) { panic("subscriber bug") })
	c.tick(at(100))
	unsub()
	c.tick(at(200))
	if !eqInts(got, []int64{100}) {
		t.Errorf("callback saw %v, want [100] (unsubscribed before 200)", got)
	}
	if st := c.Status(); st.Errors != 2 || !strings.Contains(st.LastError, "OnTick") {
		t.Errorf("callback panics not counted: %+v", st)
	}
	if n := len(c.Series(0, 0, 0, 0)); n != 2 {
		t.Errorf("%d samples stored despite the panicking subscriber, want 2", n)
	}
}

func TestLatestIsACopy(t *testing.T) {
	g := &GPMSample{SMActivePct: 12.5}
	f := &fakeSampler{sample: func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		g.SMActivePct = float64(n) // the sampler reuses its storage
		return []DeviceSample{{TimeMS: now.UnixMilli(), Device: 2, Valid: FieldGPMSMActive, GPM: g}}, nil, nil
	}}
	c := NewCollector(f, Options{})
	c.tick(at(100))
	l := c.Latest()
	g.SMActivePct = 99
	if len(l) != 1 || l[0].Device != 2 || l[0].GPM == nil || l[0].GPM.SMActivePct != 1 {
		t.Fatalf("Latest %+v", l)
	}
	l[0].GPM.SMActivePct = 42
	if l2 := c.Latest(); l2[0].GPM.SMActivePct != 1 {
		t.Errorf("Latest shares storage with a previous result")
	}
	s := c.Series(2, 0, 0, 0)
	if len(s) != 1 || s[0].GPM == nil || s[0].GPM.SMActivePct != 1 || s[0].Has(FieldGPMDRAMBW) {
		t.Errorf("Series %+v", s)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	in := DeviceSample{
		TimeMS: 1234, Device: 3, Valid: FieldMemUsed | FieldMemTotal | FieldMemReserved | FieldUtilGPU | FieldUtilMem |
			FieldPCIeTx | FieldPCIeRx | FieldPower | FieldTemp | FieldSMClock | FieldsGPM,
		MemUsedBytes: 150 << 30, MemTotalBytes: 151 << 30, MemReservedBytes: 600 << 20,
		UtilGPUPct: 97, UtilMemPct: 40, PCIeTxKBps: 12_000_000, PCIeRxKBps: 3, PowerMW: 695_123, TempC: 71, SMClockMHz: 1980,
		GPM: &GPMSample{SMActivePct: 88.25, SMOccupancyPct: 33.5, TensorActivePct: 61.75, DRAMBWUtilPct: 100},
	}
	r := toRecord(&in)
	out := r.sample(3, "")
	if out.GPM == nil || *out.GPM != *in.GPM {
		t.Errorf("GPM %+v, want %+v", out.GPM, in.GPM)
	}
	out.GPM, in.GPM = nil, nil
	if out != in {
		t.Errorf("round trip\n got %+v\nwant %+v", out, in)
	}
	if sz := unsafe.Sizeof(devRecord{}); sz != 64 {
		t.Errorf("devRecord is %d bytes, want 64", sz)
	}
	if sz := unsafe.Sizeof(procRecord{}); sz != 24 {
		t.Errorf("procRecord is %d bytes, want 24", sz)
	}
	// An hour at 10 Hz on 8 GPUs stays under 20 MB.
	o := Options{}.withDefaults()
	if o.Capacity != 36000 || o.Interval != 100*time.Millisecond {
		t.Errorf("defaults %+v", o)
	}
	if total := 8 * o.Capacity * int(unsafe.Sizeof(devRecord{})); total >= 20e6 {
		t.Errorf("8 full rings take %d bytes", total)
	}
}

func TestJSONOmitsNoData(t *testing.T) {
	s := DeviceSample{TimeMS: 5, Device: 1, UUID: "GPU-x", Valid: FieldUtilGPU | FieldMemUsed | FieldGPMDRAMBW,
		UtilGPUPct: 0, MemUsedBytes: 10, PowerMW: 123, GPM: &GPMSample{DRAMBWUtilPct: 7.5, SMActivePct: 3}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time_ms":5,"device":1,"uuid":"GPU-x","mem_used_bytes":10,"util_gpu_pct":0,"gpm":{"dram_bw_util_pct":7.5}}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	var back DeviceSample
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Valid != s.Valid || back.UtilGPUPct != 0 || back.MemUsedBytes != 10 || back.PowerMW != 0 ||
		back.GPM == nil || back.GPM.DRAMBWUtilPct != 7.5 || back.GPM.SMActivePct != 0 {
		t.Errorf("decoded %+v (GPM %+v)", back, back.GPM)
	}

	p := ProcessSample{TimeMS: 1, Device: 2, PID: 99, Valid: ProcUsed | ProcSMUtil, UsedBytes: 1 << 20, MemUtilPct: 5}
	b, _ = json.Marshal(p)
	if want := `{"time_ms":1,"device":2,"pid":99,"used_bytes":1048576,"sm_util_pct":0}`; string(b) != want {
		t.Errorf("process JSON\n got %s\nwant %s", b, want)
	}
	var pb ProcessSample
	if err := json.Unmarshal(b, &pb); err != nil || pb.Valid != p.Valid || pb.MemUtilPct != 0 {
		t.Errorf("process decoded %+v, %v", pb, err)
	}
	// No GPM data: no gpm key, even with a pointer set.
	b, _ = json.Marshal(DeviceSample{GPM: &GPMSample{}})
	if strings.Contains(string(b), "gpm") {
		t.Errorf("empty GPM written: %s", b)
	}
}

func TestTickDoesNotAllocate(t *testing.T) {
	ds := []DeviceSample{{Device: 0, Valid: FieldMemUsed}, {Device: 1, Valid: FieldMemUsed | FieldsGPM, GPM: &GPMSample{}}}
	ps := []ProcessSample{{PID: 1, Valid: ProcUsed}}
	f := &fakeSampler{sample: func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		for i := range ds {
			ds[i].TimeMS = now.UnixMilli()
		}
		ps[0].TimeMS = now.UnixMilli()
		return ds, ps, nil
	}}
	c := NewCollector(f, Options{Capacity: 8})
	ms := int64(0)
	for range 20 { // fill the rings
		ms += 100
		c.tick(at(ms))
	}
	allocs := testing.AllocsPerRun(100, func() {
		ms += 100
		c.tick(at(ms))
	})
	if allocs != 0 {
		t.Errorf("a tick allocates %.1f times", allocs)
	}
}

func TestUnavailable(t *testing.T) {
	s := Unavailable(Status{Available: true, Reason: "no NVIDIA driver (test)"})
	if st := s.Status(); st.Available || st.Reason != "no NVIDIA driver (test)" {
		t.Errorf("status %+v", st)
	}
	d, p, err := s.Sample(time.Now())
	if d != nil || p != nil || err != nil || s.Devices() != nil {
		t.Errorf("unavailable sampler sampled")
	}
	c := NewCollector(s, Options{})
	c.tick(time.Now())
	if len(c.Latest()) != 0 || c.Status().Available {
		t.Errorf("collector over an unavailable sampler: %+v", c.Status())
	}
	s.Close()
}

// slowTierSampler: memory every tick, power and GPM every 10th tick (as the
// NVML sampler's slow tier), power stopping after tick 30.
func slowTierSampler() *fakeSampler {
	g := &GPMSample{}
	return &fakeSampler{sample: func(n int64, now time.Time) ([]DeviceSample, []ProcessSample, error) {
		s := DeviceSample{TimeMS: now.UnixMilli(), Device: 0, Valid: FieldMemUsed, MemUsedBytes: uint64(n)}
		if n%10 == 1 && n <= 30 {
			s.Valid |= FieldPower | FieldGPMSMActive
			s.PowerMW = uint32(1000 * n)
			g.SMActivePct = float64(n)
			s.GPM = g
		}
		var ps []ProcessSample
		if n <= 60 {
			p := ProcessSample{TimeMS: now.UnixMilli(), PID: 9, Valid: ProcUsed, UsedBytes: 5}
			if n == 1 {
				p.Valid |= ProcSMUtil | ProcMemUtil
				p.SMUtilPct, p.MemUtilPct = 80, 20
			}
			ps = append(ps, p)
		}
		return []DeviceSample{s}, ps, nil
	}}
}

func TestLatestFillsSlowFields(t *testing.T) {
	c := NewCollector(slowTierSampler(), Options{})
	step := int64(100)
	for n := int64(1); n <= 25; n++ {
		c.tick(at(n * step))
	}
	// Tick 25 has memory only; power and GPM come from tick 21.
	l := c.Latest()
	if len(l) != 1 || l[0].TimeMS != 2500 || l[0].MemUsedBytes != 25 || !l[0].Has(FieldPower|FieldGPMSMActive) ||
		l[0].PowerMW != 21000 || l[0].GPM == nil || l[0].GPM.SMActivePct != 21 || l[0].Has(FieldGPMDRAMBW) {
		t.Errorf("Latest %+v (GPM %+v)", l, l[0].GPM)
	}
	if p := c.Processes(); len(p) != 1 || !p[0].Has(ProcSMUtil|ProcMemUtil) || p[0].SMUtilPct != 80 || p[0].TimeMS != 2500 {
		t.Errorf("Processes %+v: utilisation from tick 1 not carried", p)
	}
	// The raw series keeps them sparse.
	raw := c.Series(0, 0, 0, 0)
	if raw[23].Has(FieldPower) || !raw[20].Has(FieldPower) {
		t.Errorf("raw samples changed: %b %b", raw[23].Valid, raw[20].Valid)
	}
	// Power was last read at tick 21 (2.1 s); LatestMaxAge later it is gone.
	for n := int64(26); n <= 31+LatestMaxAge.Milliseconds()/step; n++ {
		c.tick(at(n * step))
	}
	l = c.Latest()
	if l[0].Has(FieldPower) || l[0].PowerMW != 0 || l[0].GPM != nil {
		t.Errorf("a field older than LatestMaxAge kept: %+v", l[0])
	}
	if p := c.Processes(); len(p) != 0 {
		t.Errorf("pid 9 exited, still listed: %+v", p)
	}
}

func TestDownsampleKeepsSparseFields(t *testing.T) {
	c := NewCollector(slowTierSampler(), Options{})
	for n := int64(1); n <= 40; n++ {
		c.tick(at(n * 100))
	}
	// 4 buckets of 10 ticks: each has one power reading (ticks 1, 11, 21)
	// but for the last, and its memory peak at the bucket's end.
	got := c.Series(0, 0, 0, 4)
	if len(got) != 4 {
		t.Fatalf("%d points", len(got))
	}
	for b, s := range got {
		if want := uint64(10 * (b + 1)); s.MemUsedBytes != want || s.TimeMS != int64(want)*100 {
			t.Errorf("bucket %d: memory %d at %d, want the peak %d at %d", b, s.MemUsedBytes, s.TimeMS, want, want*100)
		}
		if b < 3 {
			if wantP := uint32(1000 * (10*b + 1)); !s.Has(FieldPower) || s.PowerMW != wantP || s.GPM == nil || s.GPM.SMActivePct != float64(10*b+1) {
				t.Errorf("bucket %d: power %d (%v) GPM %+v, want %d", b, s.PowerMW, s.Has(FieldPower), s.GPM, wantP)
			}
		} else if s.Has(FieldPower) || s.GPM != nil {
			t.Errorf("bucket 3 has power it never read: %+v", s)
		}
	}
	// Processes: utilisation only at tick 1 survives into its bucket.
	ps := c.ProcessSeries(9, 0, 0, 2)
	if len(ps) != 2 || !ps[0].Has(ProcSMUtil) || ps[0].SMUtilPct != 80 || ps[1].Has(ProcSMUtil) {
		t.Errorf("process buckets %+v", ps)
	}
}

// TestPhaseReaderReadsTheWireForm pins the two ways a sample reaches the
// phase classifier to its one wire form (daemon/api.DeviceSample): the
// daemon converts its samples directly (PhaseSample), the CLI's
// `vramscope counters --phases FILE` reads their JSON (gpuphase.ReadFile);
// a renamed JSON tag makes them differ.
func TestPhaseReaderReadsTheWireForm(t *testing.T) {
	s := DeviceSample{TimeMS: 1_700_000_000_000, Device: 1, UUID: "GPU-x", Valid: ^Fields(0),
		MemUsedBytes: 3 << 30, MemTotalBytes: 80 << 30, UtilGPUPct: 97, UtilMemPct: 41, PCIeTxKBps: 1200, PCIeRxKBps: 3400,
		PowerMW: 512_000, GPM: &GPMSample{SMActivePct: 88.5, DRAMBWUtilPct: 61.25}}
	b, err := json.Marshal(api.SeriesResult{Device: 1, Samples: WireSamples([]DeviceSample{s})})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "series.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	read, err := gpuphase.ReadFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := s.PhaseSample()
	if len(read) != 1 || !reflect.DeepEqual(read[0], want) {
		t.Errorf("gpuphase.ReadFile read %+v from %s; PhaseSample is %+v", read, b, want)
	}
}
