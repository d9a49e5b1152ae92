package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/counters"
)

// fakeGPUs is a two-GPU sampler: GPU 0 has GPM and a process, GPU 1 does not
// report power.
type fakeGPUs struct {
	mu     sync.Mutex
	n      int
	closed bool
	gpm    counters.GPMSample
	out    []counters.DeviceSample
	util0  uint32 // GPU 0's utilization.gpu; 0: 97%
}

func (f *fakeGPUs) Devices() []counters.DeviceInfo {
	return []counters.DeviceInfo{
		{Index: 0, Name: "Fake H200", UUID: "GPU-0", MemoryTotalBytes: 141 << 30, Architecture: "Hopper", ComputeCapability: "9.0", GPM: true},
		{Index: 1, Name: "Fake A100", UUID: "GPU-1", MemoryTotalBytes: 80 << 30, Architecture: "Ampere"},
	}
}

func (f *fakeGPUs) Status() counters.Status {
	return counters.Status{Available: true, DriverVersion: "550.54.15", CUDADriverVersion: 12040, DeviceCount: 2}
}

func (f *fakeGPUs) Close() { f.mu.Lock(); f.closed = true; f.mu.Unlock() }

func (f *fakeGPUs) Sample(now time.Time) ([]counters.DeviceSample, []counters.ProcessSample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	ms := now.UnixMilli()
	f.gpm = counters.GPMSample{SMActivePct: 88.5, SMOccupancyPct: 30, TensorActivePct: 60, DRAMBWUtilPct: 45}
	all := counters.FieldMemUsed | counters.FieldMemTotal | counters.FieldUtilGPU | counters.FieldUtilMem |
		counters.FieldTemp | counters.FieldSMClock
	util0 := f.util0
	if util0 == 0 {
		util0 = 97
	}
	f.out = append(f.out[:0],
		counters.DeviceSample{TimeMS: ms, Device: 0, UUID: "GPU-0", Valid: all | counters.FieldPower | counters.FieldsGPM,
			MemUsedBytes: uint64(f.n) << 30, MemTotalBytes: 141 << 30, UtilGPUPct: util0, PowerMW: 650_000, TempC: 70, SMClockMHz: 1980, GPM: &f.gpm},
		counters.DeviceSample{TimeMS: ms, Device: 1, UUID: "GPU-1", Valid: all, MemTotalBytes: 80 << 30, UtilGPUPct: 0, TempC: 30, SMClockMHz: 210},
	)
	return f.out, []counters.ProcessSample{{TimeMS: ms, Device: 0, PID: 4242, Valid: counters.ProcUsed, UsedBytes: uint64(f.n) << 30}}, nil
}

func withSampler(t *testing.T, s counters.Sampler) {
	old := openSampler
	openSampler = func() (counters.Sampler, counters.Status) { return s, s.Status() }
	t.Cleanup(func() { openSampler = old })
}

func TestCountersTable(t *testing.T) {
	f := &fakeGPUs{}
	withSampler(t, f)
	var out, errb bytes.Buffer
	if code := Main([]string{"counters", "--interval", "10ms", "--duration", "300ms"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	o := out.String()
	for _, want := range []string{
		"NVML: driver 550.54.15, CUDA 12.4, 2 GPUs",
		"GPU 0  Fake H200  GPU-0  141.0 GiB  Hopper 9.0", "GPU 1  Fake A100",
		"mem used/total", "88.5%", "650 W", "1980",
		"summary over the run:", "util mean 97% peak 97%", "SM active 88.5%",
		"processes:", "4242",
		"sampling:",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	// GPU 1 has no power: "-" in its row, not "0 W".
	for _, l := range strings.Split(o, "\n") {
		if strings.Contains(l, ":") && strings.Contains(l, " 210 ") && strings.Contains(l, "0 W") {
			t.Errorf("GPU 1 shows a power it never reported: %q", l)
		}
	}
	if !f.closed {
		t.Errorf("sampler not closed")
	}
}

func TestCountersJSON(t *testing.T) {
	f := &fakeGPUs{}
	withSampler(t, f)
	var out, errb bytes.Buffer
	if code := Main([]string{"counters", "--json", "--interval", "10ms", "--duration", "200ms"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	kinds := map[string]int{}
	last := map[int]int64{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || len(m) != 1 {
			t.Fatalf("not a one-key JSON line: %q (%v)", sc.Text(), err)
		}
		for k, v := range m {
			kinds[k]++
			if k == "sample" {
				var s counters.DeviceSample
				if err := json.Unmarshal(v, &s); err != nil {
					t.Fatal(err)
				}
				if s.TimeMS <= last[s.Device] {
					t.Errorf("GPU %d: sample at %d after %d (repeated or out of order)", s.Device, s.TimeMS, last[s.Device])
				}
				last[s.Device] = s.TimeMS
				if s.Device == 1 && (s.Has(counters.FieldPower) || strings.Contains(string(v), "power_mw")) {
					t.Errorf("GPU 1 power written: %s", v)
				}
				if s.Device == 0 && (s.GPM == nil || s.GPM.SMActivePct != 88.5) {
					t.Errorf("GPU 0 GPM lost: %s", v)
				}
			}
		}
	}
	if kinds["status"] != 1 || kinds["device"] != 2 || kinds["summary"] != 1 || kinds["sample"] < 4 || kinds["process"] < 2 {
		t.Errorf("line kinds %v", kinds)
	}
	// Every tick's samples were printed: the store saw f.n ticks.
	if kinds["sample"] != 2*f.n {
		t.Errorf("%d sample lines for %d ticks of 2 GPUs", kinds["sample"], f.n)
	}
}

func TestCountersUnavailable(t *testing.T) {
	withSampler(t, counters.Unavailable(counters.Status{Reason: "no NVIDIA driver (libnvidia-ml.so not found)"}))
	var out, errb bytes.Buffer
	if code := Main([]string{"counters", "--duration", "50ms"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := out.String(); got != "NVML: unavailable: no NVIDIA driver (libnvidia-ml.so not found)\n" {
		t.Errorf("output %q", got)
	}
	if code := Main([]string{"counters", "extra"}, &out, &errb); code != exitInput {
		t.Errorf("an argument: exit %d", code)
	}
}
