package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/counters"
)

// gpuProcess is one process NVML sees on a GPU.
type gpuProcess struct {
	PID       int
	Device    int
	UsedBytes uint64
}

// counterSource is what the daemon needs of the NVML sampler.
type counterSource struct {
	col  *counters.Collector
	st   counters.Status
	stop func()
	mu   sync.Mutex
	last time.Time
}

// openCounters opens NVML (or notes why it cannot) behind a Collector.
func openCounters(cfg Config) *counterSource {
	var s counters.Sampler
	if cfg.NoCounters {
		s = counters.Unavailable(counters.Status{Reason: "counters disabled (--no-counters)"})
	} else if cfg.Sampler != nil {
		s = cfg.Sampler
	} else {
		s, _ = counters.Open()
	}
	c := &counterSource{col: counters.NewCollector(s, counters.Options{Interval: cfg.Interval}), st: s.Status()}
	if !c.st.Available {
		cfg.Logf("counters: %s", c.st.Reason)
	}
	return c
}

// Start samples until Stop; tick is called about once a second with the
// latest samples (for the counters_tick notification).
func (c *counterSource) Start(ctx context.Context, tick func()) {
	if !c.st.Available {
		return
	}
	c.stop = c.col.OnTick(func([]counters.DeviceSample) {
		c.mu.Lock()
		due := time.Since(c.last) >= time.Second
		if due {
			c.last = time.Now()
		}
		c.mu.Unlock()
		if due {
			go tick()
		}
	})
	c.col.Start(ctx)
}

func (c *counterSource) Stop() {
	if c.stop != nil {
		c.stop()
	}
	c.col.Stop()
}

func (c *counterSource) Status() api.CountersStatus {
	st := c.col.Status()
	return api.CountersStatus{Available: st.Available, Reason: st.Reason, Driver: st.DriverVersion,
		Devices: st.DeviceCount, IntervalMS: c.col.Options().Interval.Milliseconds()}
}

func (c *counterSource) Processes() []gpuProcess {
	var out []gpuProcess
	for _, p := range c.col.Processes() {
		out = append(out, gpuProcess{PID: int(p.PID), Device: p.Device, UsedBytes: p.UsedBytes})
	}
	return out
}

func (c *counterSource) devices() api.DevicesResult {
	return api.DevicesResult{Status: c.Status(), Devices: nonNil(c.col.Devices()), Latest: counters.WireSamples(c.col.Latest()), Phases: c.currentPhases()}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// tick publishes the latest counters to counters_tick subscribers.
func (d *Daemon) tick() {
	d.events.publish(api.EventCountersTick, d.counters.devices())
}

func (s *session) countersDevices(_ context.Context, _ noParams) (api.DevicesResult, error) {
	return s.d.counters.devices(), nil
}

func (s *session) countersSeries(_ context.Context, p api.SeriesParams) (any, error) {
	if p.MaxPoints <= 0 {
		p.MaxPoints = 2000
	}
	to := p.ToMS
	if to == 0 {
		to = time.Now().UnixMilli() + 1
	}
	if p.PID > 0 {
		return api.ProcessSeriesResult{Device: p.Device, PID: p.PID,
			Samples: counters.WireProcessSamples(s.d.counters.col.ProcessSeries(uint32(p.PID), p.FromMS, to, p.MaxPoints))}, nil
	}
	if p.Device < 0 {
		return nil, fail(errInvalid, "counters.series needs a device (≥ 0) or a pid")
	}
	return api.SeriesResult{Device: p.Device, Samples: counters.WireSamples(s.d.counters.col.Series(p.Device, p.FromMS, to, p.MaxPoints))}, nil
}

// deviceTotal is the memory NVML reports for a CUDA device index (0: no NVML,
// or no such device). NVML's index order matches CUDA's unless
// CUDA_VISIBLE_DEVICES reorders them; the caller can always pass the size.
func (d *Daemon) deviceTotal(device int) int64 {
	if d.counters == nil {
		return 0
	}
	for _, s := range d.counters.col.Latest() {
		if s.Device == device && s.Valid&counters.FieldMemTotal != 0 {
			return int64(s.MemTotalBytes)
		}
	}
	return 0
}

// deviceByUUID maps a GPU's UUID (from an agent) to NVML's index: the device
// an agent reports by CUDA's numbering (CUDA_VISIBLE_DEVICES renumbers, and
// LOCAL_RANK is not a device) becomes the one NVML and the counters use.
func (c *counterSource) deviceByUUID(uuid string) (int, bool) {
	if c == nil || c.col == nil || uuid == "" {
		return 0, false
	}
	return c.col.DeviceByUUID(uuid)
}
