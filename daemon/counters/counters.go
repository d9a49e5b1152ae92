// Package counters samples NVIDIA GPU counters — memory used/total/reserved,
// utilisation, PCIe throughput, power, temperature, SM clock, the Hopper+ GPM
// metrics (SM active, SM occupancy, tensor active, DRAM bandwidth) and the
// per-process memory and utilisation NVML reports — and keeps an hour of them
// in bounded ring buffers for the daemon to serve.
//
// The package is split so that everything but the NVML binding builds without
// cgo, and by concern: sample.go holds the samples and their JSON, sampler.go
// the Sampler interface, this file the Collector (the sampling loop and the
// ring-buffer store), ring.go the rings and their downsampling, latest.go the
// newest value of each field, series.go what the Collector serves; nvml.go
// (cgo) implements Sampler on github.com/NVIDIA/go-nvml; nvml_nocgo.go stands
// in for it when cgo is off.
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
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

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
