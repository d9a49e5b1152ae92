// Package analyze turns a snapshot into answers: the peak and what was live at
// it, which source lines hold memory, a flame graph, memory over time, the
// allocator's state, and what changed between two snapshots. It reads the
// snapshot once, streaming, through torchsnap.
package analyze

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// Options control an analysis.
type Options struct {
	Paths    *profiler.PathMap       // remote -> local file names; nil keeps them
	Progress func(done, total int64) // bytes read over both decoding passes
	// DeviceMemory is the memory of the device (or the process's cap), when
	// the caller knows it (NVML, the user); a snapshot does not record it.
	// Findings use it for "near capacity" and for when a leak fills the device.
	DeviceMemory int64
	// FileNames are the names texts use for some recorded files (finding
	// titles and fixes, phase names): the notebook names its cells' files
	// "cell [3]". Other files read as their base name. The files themselves
	// (Site.File, frames) stay the recorded ones.
	FileNames map[string]string
	// KeepTrace keeps each device's allocations in order, classified, for
	// Result.FitModel (vramscope fit): about 32 bytes an allocation. An
	// analysis of a snapshot that ran out of memory keeps them anyway (its
	// finding says which plan fits).
	KeepTrace bool
}

// Peak is the highest allocated memory of one device.
type Peak struct {
	Bytes  int64 `json:"bytes"`
	TimeUS int64 `json:"time_us"`
	Device int   `json:"device"`
	Seq    int64 `json:"event"` // index of the trace event that reached it; -1: before the trace
}

// Result is a finished analysis. It keeps per-origin totals, so flame graphs,
// pprof profiles and diffs are made from it without decoding again.
type Result struct {
	File      string   `json:"file"`
	Bytes     int64    `json:"file_bytes"`
	Events    int64    `json:"events"`
	Peak      Peak     `json:"peak"`
	Devices   []Device `json:"devices"`
	Sites     []Site   `json:"sites"`
	LeafSites []Site   `json:"leaf_sites"`
	// SitesMore and LeafSitesMore count the sites past MaxSummarySites that
	// the JSON of a result leaves out (the result itself keeps them all).
	SitesMore     int       `json:"sites_more,omitempty"`
	LeafSitesMore int       `json:"leaf_sites_more,omitempty"`
	Stacks        []Stack   `json:"top_stacks"`
	Coverage      Coverage  `json:"attribution"`
	OOMs          []OOM     `json:"ooms"`
	Findings      []Finding `json:"findings"`
	// Steps and Categories are those of the device with the highest peak.
	Steps      []Step `json:"steps"`
	StepSource string `json:"step_source"` // "annotations", "periodicity" or "" (none found)
	// StepsBeforeTrace counts the optimizer steps annotated before the
	// trace's first event (the annotations' ring reaches further back than
	// the trace's): their memory was not recorded, so they are not in Steps.
	StepsBeforeTrace int               `json:"steps_before_trace,omitempty"`
	Categories       []Category        `json:"categories"` // memory live at the peak by category
	DeviceMemory     int64             `json:"device_memory,omitempty"`
	Settings         profiler.Settings `json:"allocator_settings"`
	Annotations      int               `json:"annotations"`
	Legacy           bool              `json:"legacy_layout,omitempty"`
	// Tensors is what the agent named among the blocks alive at snapshot
	// time; absent when the snapshot carries no names.
	Tensors *Tensors `json:"named_tensors,omitempty"`
	// Road is the run up to the snapshot, step by step, when the agent
	// measured it and the daemon kept it (SetRoad, road.go).
	Road *Road `json:"road,omitempty"`

	frames  *profiler.Frames
	origins *origins
	paths   *profiler.PathMap
	moments *momentSource // the peak device's live set over time (moments.go)
	// qualnames reads methods' classes from the source for flame labels (flame.go).
	qualnames *profiler.Qualnames
	// AllocatorMaps are each device's segments and blocks at the snapshot,
	// the peak and the first OOM (allocmap.go).
	AllocatorMaps []AllocatorMaps `json:"allocator_maps"`
}

// Device is the per-GPU part of a result.
type Device struct {
	Device    int       `json:"device"`
	Events    int64     `json:"events"`
	Peak      Peak      `json:"peak"`
	Allocator Allocator `json:"allocator"`
	Timeline  Timeline  `json:"timeline"`
	// PreTraceBytes were allocated before the trace's first event (the ring
	// buffer had wrapped, or recording started late).
	PreTraceBytes int64  `json:"pre_trace_bytes"`
	StartUS       int64  `json:"start_us"`
	EndUS         int64  `json:"end_us"`
	Steps         []Step `json:"steps"`
	StepSource    string `json:"step_source"`
	// StepsBeforeTrace: see Result.StepsBeforeTrace.
	StepsBeforeTrace int        `json:"steps_before_trace,omitempty"`
	Categories       []Category `json:"categories"` // at this device's peak
	// StepsIncomplete: the trace has more allocations and frees than the
	// level log can index (2^31); steps cover its beginning only.
	StepsIncomplete bool `json:"steps_incomplete,omitempty"`
	// KVCache is the key/value cache the agent named at the snapshot (kvcache.go).
	KVCache *KVCache `json:"kv_cache,omitempty"`

	pre     preTraceSplit // pre-trace memory alive at the end, by category (pretrace.go)
	moments *momentSource
	fit     *fitTrace // the allocations in order, for FitModel (fit_trace.go); nil unless kept
	// preBlocks are the blocks alive at the end that the trace never
	// allocated, and preReserved what the allocator held before the trace.
	preBlocks   []fitPreBlock
	preReserved int64
}

// analysis is the state of one run.
type analysis struct {
	frames   *profiler.Frames
	origins  *origins
	trackers []*tracker
	names    *tensorIndex // nil: the snapshot carries no tensor names
	// Memory alive at snapshot time, with named tensors: all of it, in named
	// blocks, and in other blocks whose origin names a user line or phase.
	liveBytes, namedBytes, lineBytes int64
	keepFit                          bool // Options.KeepTrace
}

// Run analyses the snapshot at path. Decoding and replay run on two
// goroutines joined by a pipe of event batches.
func Run(path string, opt Options) (*Result, error) {
	return RunContext(context.Background(), path, opt)
}

// RunStream analyses a VSM1 stream (a FIFO or socket the snapshot is still
// being written to) as it arrives; name is what the result calls the file.
func RunStream(name string, r io.Reader, opt Options) (*Result, error) {
	return RunStreamContext(context.Background(), name, r, opt)
}

// FromBytes analyses a snapshot held in memory.
func FromBytes(name string, b []byte, opt Options) (*Result, error) {
	return run(name, opt, func(frames *profiler.Frames, on torchsnap.EventFunc) (*torchsnap.Snapshot, error) {
		snap, err := torchsnap.Decode(b, frames, on)
		if err != nil {
			return nil, err
		}
		snap.Path = name
		return snap, nil
	})
}

// run decodes with read, replaying its events on a second goroutine. A
// panic on either goroutine is returned as a *PanicError naming the file
// (name) instead of ending the process.
func run(name string, opt Options, read func(*profiler.Frames, torchsnap.EventFunc) (*torchsnap.Snapshot, error)) (_ *Result, err error) {
	defer recovered(name, &err)
	frames := profiler.NewFrames()
	a := &analysis{frames: frames, origins: newOrigins(frames), keepFit: opt.KeepTrace}
	a.origins.fileNames = opt.FileNames
	p := a.pipe()
	defer p.close()
	snap, err := read(frames, p.event)
	p.close()
	if perr := p.err(); perr != nil {
		// First: a read the panic stopped fails with its message only (the
		// pickle machine keeps no wrapped errors), and the caller logs the
		// panic's stack from this one.
		return nil, fmt.Errorf("%s: %w", name, perr)
	}
	if err != nil {
		return nil, err
	}
	return a.finish(snap, opt), nil
}

func (a *analysis) replay(trace int, e *profiler.Event, user bool) {
	for trace >= len(a.trackers) {
		a.trackers = append(a.trackers, newTracker(a, len(a.trackers)))
	}
	a.trackers[trace].event(e, user)
}

func (a *analysis) finish(snap *torchsnap.Snapshot, opt Options) *Result {
	r := &Result{File: snap.Path, Bytes: snap.Bytes, Settings: snap.Settings, Annotations: len(snap.Annotations),
		Legacy: snap.Legacy, frames: a.frames, origins: a.origins, paths: opt.Paths, qualnames: new(profiler.Qualnames)}
	byDevice := map[int]*tracker{}
	for _, t := range a.trackers {
		t.finish()
		byDevice[snap.TraceDevices[t.trace]] = t
		r.Events += t.events
	}
	a.origins.label(snap.Annotations)
	a.names = newTensorIndex(snap.Tensors)
	if a.names != nil { // the methods the agent's walk recorded name frames the source cannot (library code not on this machine)
		r.qualnames.Seed(a.names.walk.Methods, r.paths.Map)
	}
	var diags []*devDiag
	peakDev := 0
	for _, dev := range devicesOf(snap, byDevice) {
		d := a.device(dev, byDevice[dev], snap)
		r.AllocatorMaps = append(r.AllocatorMaps, a.allocatorMaps(dev, byDevice[dev], snap))
		var ooms []OOM
		if t := byDevice[dev]; t != nil {
			ooms = a.ooms(t, d)
		}
		dg := a.diagnose(&d, byDevice[dev], snap, ooms)
		r.Devices = append(r.Devices, d)
		if d.Peak.Bytes > r.Peak.Bytes || len(r.Devices) == 1 {
			r.Peak = d.Peak
			peakDev = len(r.Devices) - 1
			r.moments = d.moments
		}
		r.OOMs = append(r.OOMs, ooms...)
		diags = append(diags, dg)
	}
	r.DeviceMemory = opt.DeviceMemory
	if len(r.Devices) > 0 {
		pd := r.Devices[peakDev]
		r.Steps, r.StepSource, r.Categories, r.StepsBeforeTrace = pd.Steps, pd.StepSource, pd.Categories, pd.StepsBeforeTrace
	} else {
		r.Steps, r.Categories = []Step{}, []Category{}
	}
	var peaks int64 // sites cover every device, so shares are of all devices' peaks
	for _, d := range r.Devices {
		peaks += d.Peak.Bytes
	}
	r.Sites, r.LeafSites, r.Coverage = a.sites(peaks)
	r.Tensors = a.names.section(a.liveBytes, a.namedBytes, a.lineBytes)
	r.Stacks = a.topStacks(20)
	r.Findings = append([]Finding{}, a.findings(r, diags)...)
	if !a.keepFit { // the OOM finding's plans are made: the trace goes (Options.KeepTrace)
		for i := range r.Devices {
			r.Devices[i].fit = nil
		}
	}
	if r.OOMs == nil {
		r.OOMs = []OOM{}
	}
	r.mapPaths()
	return r
}

// devicesOf lists the devices that have segments or a trace, in order.
func devicesOf(snap *torchsnap.Snapshot, byDevice map[int]*tracker) []int {
	seen := map[int]bool{}
	for dev := range byDevice {
		seen[dev] = true
	}
	for _, s := range snap.Segments {
		seen[s.Device] = true
	}
	var out []int
	for dev := range seen {
		out = append(out, dev)
	}
	sort.Ints(out)
	return out
}

// device settles one device: baselines from the snapshot's segments, the
// blocks live at the peak, and the bytes alive at the end.
func (a *analysis) device(dev int, t *tracker, snap *torchsnap.Snapshot) Device {
	d := Device{Device: dev, KVCache: a.kvCache(dev)}
	var segs []profiler.Segment
	var reserved int64
	for _, s := range snap.Segments {
		if s.Device == dev {
			segs = append(segs, s)
			reserved += int64(s.TotalSize)
		}
	}
	d.Allocator = allocatorState(segs, snap.Settings)
	if t == nil {
		t = newTracker(a, -1)
	}
	d.moments = &momentSource{device: dev, grid: t.moments, base: map[int32]int64{}}
	// Blocks alive at the end that the trace never allocated were there all along.
	var preLive int64
	stateUnseen := a.optimizerStateUnseen(segs, t, len(stepWindows(snap.Annotations, dev)) > 0)
	flight, flightOK := a.backwardInFlight(t)
	for _, s := range segs {
		for _, b := range s.Blocks {
			if b.State == profiler.BlockInactive {
				continue
			}
			lb, tracked := t.live[b.Addr]
			name := a.names.at(dev, b.Addr)
			var o int32
			switch {
			case tracked:
				o = lb.resolved()
			default:
				o = a.origins.preTrace(b.Stack)
				inFlight := false
				switch {
				case name != nil && b.Stack == 0:
					o = a.tensorOrigin(name)
				case name == nil && b.Stack == 0 && flightOK && !s.PrivatePool():
					o, inFlight = flight, true
				}
				preLive += int64(b.Size)
				d.moments.base[o] += int64(b.Size)
				a.addPeak(o, int64(b.Size))
				c := a.preCategory(b.Stack, name, stateUnseen, s.PrivatePool())
				if inFlight {
					c = CatGradient
				}
				d.preBlocks = append(d.preBlocks, fitPreBlock{size: int64(b.Size), cat: c})
				d.pre.add(c, int64(b.Size))
				a.origins.at(o).addCat(c, int64(b.Size))
			}
			if a.names != nil {
				a.countNamed(name, o, int64(b.Size))
			}
			x := a.origins.at(o)
			x.currentBytes += int64(b.Size)
			x.currentCount++
		}
	}
	for _, b := range t.live {
		if b.seq <= t.peakAt {
			a.addPeak(b.resolved(), b.size)
		}
	}
	for _, b := range t.freedSincePeak {
		a.addPeak(b.resolved(), b.size)
	}
	base := preLive + t.preFreed
	if t.preFreed > 0 {
		d.moments.base[a.origins.preTrace(0)] += t.preFreed // its frees count against this origin
	}
	d.PreTraceBytes = base
	d.Peak = Peak{Bytes: base + t.peak, TimeUS: t.peakT, Device: dev, Seq: t.peakAt}
	if t.peakAt < 0 {
		d.Peak.TimeUS = t.firstT
	}
	d.Events, d.StartUS, d.EndUS = t.events, t.firstT, t.lastT
	d.Timeline = t.timeline.result(dev, base, reserved-t.rcur, snap.Annotations)
	d.preReserved = reserved - t.rcur
	return d
}

func (a *analysis) addPeak(o int32, size int64) {
	x := a.origins.at(o)
	x.peakBytes += size
	x.peakCount++
}
