package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// replay is a Sampler that plays one labelled phase of the H200 recording
// (profiler/gpuphase/testdata/h200) over and over, stamped with the time now.
type replay struct {
	mu      sync.Mutex
	samples []counters.DeviceSample
	i       int
}

func (r *replay) Devices() []counters.DeviceInfo {
	return []counters.DeviceInfo{{Index: 0, Name: "NVIDIA H200 (replay)"}}
}

func (r *replay) Sample(now time.Time) ([]counters.DeviceSample, []counters.ProcessSample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples[r.i%len(r.samples)]
	r.i++
	s.TimeMS = now.UnixMilli()
	return []counters.DeviceSample{s}, nil, nil
}

func (r *replay) Status() counters.Status {
	return counters.Status{Available: true, DeviceCount: 1, DriverVersion: "replay"}
}
func (r *replay) Close() {}

// phaseSamples reads the recording's samples between two label times.
func phaseSamples(t *testing.T, class string) []counters.DeviceSample {
	const dir = "../profiler/gpuphase/testdata/h200/"
	b, err := os.ReadFile(dir + "labels.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Phases []struct {
			Class   string `json:"class"`
			StartMS int64  `json:"start_ms"`
			EndMS   int64  `json:"end_ms"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir + "nvml.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []counters.DeviceSample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Sample *counters.DeviceSample `json:"sample"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Sample == nil {
			continue
		}
		for _, p := range raw.Phases {
			if p.Class == class && rec.Sample.TimeMS > p.StartMS+1500 && rec.Sample.TimeMS < p.EndMS-1500 {
				out = append(out, *rec.Sample)
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d samples of %s", len(out), class)
	}
	return out
}

// TestLivePhase: the daemon names what the GPU does now in counters.devices,
// from the last seconds of its own samples.
func TestLivePhase(t *testing.T) {
	r := &replay{samples: phaseSamples(t, gpuphase.PCIe)}
	_, cfg := testDaemon(t, func(c *Config) { c.Sampler = r; c.Interval = 10 * time.Millisecond })
	c := dial(t, cfg.Socket)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var dev struct {
			Status api.CountersStatus `json:"status"`
			Phases []gpuphase.Phase   `json:"phases"`
		}
		if err := c.Call(context.Background(), api.CountersDevices, nil, &dev); err != nil {
			t.Fatal(err)
		}
		if !dev.Status.Available {
			t.Fatalf("status %+v", dev.Status)
		}
		if len(dev.Phases) == 1 && dev.Phases[0].Class == gpuphase.PCIe && dev.Phases[0].Evidence.Seconds >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("current phase %+v, want %s", dev.Phases, gpuphase.PCIe)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
