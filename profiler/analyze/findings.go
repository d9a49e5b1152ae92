package analyze

import (
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// Finding is a diagnosis: what is wrong, the evidence, and what to change.
type Finding struct {
	Kind     string   `json:"kind"`
	Severity string   `json:"severity"` // "error", "warning" or "info"
	Title    string   `json:"title"`
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Cause    string   `json:"cause,omitempty"`
	Evidence Evidence `json:"evidence"`
	Fix      string   `json:"fix"`
	// Plans are the ways to run the step that fit, for an out-of-memory
	// error (fit_oom.go), the first of them leading Fix.
	Plans []FitSuggestion `json:"plans,omitempty"`
}

// Evidence backs a finding with numbers, source lines and a time range.
type Evidence struct {
	Numbers map[string]int64 `json:"numbers,omitempty"`
	Lines   []EvidenceLine   `json:"lines,omitempty"`
	StartUS int64            `json:"start_us,omitempty"`
	EndUS   int64            `json:"end_us,omitempty"`
	// Tensors are the largest named groups (out_of_memory, when the agent named tensors).
	Tensors []TensorGroup `json:"tensors,omitempty"`
}

// EvidenceLine is a source line that a finding points at.
type EvidenceLine struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Bytes int64  `json:"bytes"`
	Note  string `json:"note"`
}

// OOM is an out-of-memory event in a trace, with the state around it.
type OOM struct {
	Device     int              `json:"device"`
	TimeUS     int64            `json:"time_us"`
	Requested  int64            `json:"requested"`
	Allocated  int64            `json:"allocated"`
	Reserved   int64            `json:"reserved"`
	DeviceFree uint64           `json:"device_free"`
	File       string           `json:"file"`
	Line       int              `json:"line"`
	Function   string           `json:"function"`
	Frames     []profiler.Frame `json:"frames"` // root first
	// CapAtMost is set when the device had room for the request (DeviceFree
	// at least Requested) yet the allocator refused it: a per-process cap
	// (torch.cuda.set_per_process_memory_fraction) did, and it is at most the
	// reserved bytes plus the request. 0: the device itself was full.
	CapAtMost int64 `json:"process_cap_at_most,omitempty"`
	// Cap is that cap exactly, when the agent read it at the snapshot
	// (torch.cuda.get_per_process_memory_fraction × the device's memory).
	Cap int64 `json:"process_cap,omitempty"`
}

func (a *analysis) ooms(t *tracker, d Device) []OOM {
	var out []OOM
	for _, e := range t.ooms {
		o := OOM{Device: d.Device, TimeUS: e.timeUS, Requested: e.requested, DeviceFree: e.deviceFree,
			Allocated: d.Allocator.Allocated - (t.cur - e.cur), Reserved: reservedAt(d, e.rcur, t.rcur),
			Frames: a.origins.stackPath(e.stack)}
		if f, ok := a.origins.userFrame(e.stack); ok {
			o.File, o.Line, o.Function = f.File, f.Line, f.Func
		}
		if o.DeviceFree >= uint64(o.Requested) && o.Requested > 0 {
			o.CapAtMost = o.Reserved + o.Requested
			o.Cap = a.memoryCap(d.Device)
		}
		out = append(out, o)
	}
	return out
}

// CapText names the per-process cap that refused the request: "a per-process
// cap of 6.00 GiB" when the agent read it, "a per-process cap of at most
// 7.06 GiB" when only the snapshot's figures bound it, "" when the device
// itself was full. Every text that speaks of an OOM says it this way.
func (o OOM) CapText() string {
	switch {
	case o.Cap > 0:
		return "a per-process cap of " + profiler.FormatBytes(o.Cap)
	case o.CapAtMost > 0:
		return "a per-process cap of at most " + profiler.FormatBytes(o.CapAtMost)
	}
	return ""
}

// memoryCap is the per-process cap the agent read for dev, 0 when unknown.
func (a *analysis) memoryCap(dev int) int64 {
	if a.names == nil {
		return 0
	}
	return a.names.walk.MemoryCaps[dev]
}

// reservedAt turns a replayed reserved level into bytes using the end state
// (allocated bytes at an OOM are anchored the same way: the snapshot's
// segments give exact block sizes at the end, so PyTorch's own OOM message
// and these figures agree).
func reservedAt(d Device, rcur, rend int64) int64 {
	return d.Allocator.Reserved - rend + rcur
}

// Finding kinds, in the order they are reported for a device.
const (
	KindOOM             = "oom"
	KindFragmentation   = "fragmentation"
	KindLargeAllocation = "large_allocation"
	KindActivationPeak  = "activation_peak"
	KindLeak            = "leak"
	KindCacheGrowth     = "cache_growth"
	KindOptimizerState  = "optimizer_state"
	// KindLoopAccumulation: a loop keeps every iteration's output until it
	// ends; KindUnboundedCache: a cache keyed by shape still growing at the end.
	KindLoopAccumulation = "loop_accumulation"
	KindUnboundedCache   = "unbounded_cache"
	// KindMemoryGrowth: the per-step levels of a run that has not failed
	// rise step after step (road.go); its holder, when the walk names one.
	KindMemoryGrowth = "memory_growth"
)

// nearCapacity: without an OOM, a peak is under pressure when it reaches this
// share of the device memory the caller gave (Options.DeviceMemory). 90%
// leaves what the caching allocator keeps reserved on top of the allocated
// bytes (4-21% at the peaks of the recorded healthy runs) no room.
const nearCapacity = 0.90

// devDiag is what the findings of one device read.
type devDiag struct {
	a       *analysis
	r       *Result
	d       *Device
	t       *tracker // nil: a device with segments but no trace
	opt     []window
	lt      *lifetimes
	peak    []catBlock // tracked blocks live at the peak, classified
	ooms    []oomDiag
	optName string      // "AdamW" from Optimizer.step#AdamW.step
	pools   []addrRange // private pools' segments (CUDA graphs): memory kept by design
}

// oomDiag is one OOM event with the blocks live when it failed.
type oomDiag struct {
	o      OOM
	cats   []Category
	blocks []catBlock
	atEnd  bool // nothing was allocated or freed after it: the snapshot's segments are its state
	// what the finders concluded about it
	frag, large, act bool
}

// diagnose finds the steps and the categories of one device.
func (a *analysis) diagnose(d *Device, t *tracker, snap *torchsnap.Snapshot, ooms []OOM) *devDiag {
	dg := &devDiag{a: a, t: t}
	d.Steps, d.Categories = []Step{}, []Category{}
	if t == nil {
		if a.names != nil { // no trace, only the allocator's state: the names still say what it holds
			lt := &lifetimes{a: a, order: namedCategoryOrder, pre: d.pre}
			lt.inference(a.namedKV(d.Device), false, privatePools(snap.Segments, d.Device))
			d.Categories, _ = lt.tally(nil, d.PreTraceBytes, 0, false)
		}
		return dg
	}
	dg.opt = stepWindows(snap.Annotations, d.Device)
	dg.pools = privatePools(snap.Segments, d.Device)
	if len(dg.opt) > 0 {
		name := strings.TrimPrefix(dg.opt[0].name, "Optimizer.step#")
		dg.optName, _, _ = strings.Cut(name, ".")
	}
	lv := levels{log: &t.log, base: d.PreTraceBytes, t0: t.firstT}
	d.Steps, d.StepSource, d.StepsBeforeTrace = findSteps(lv, dg.opt, t.truncated)
	d.StepsIncomplete = t.truncated
	dg.lt = newLifetimes(a, lv, dg.opt, d.Steps, d.pre)
	dg.lt.inference(a.namedKV(d.Device), a.cacheFrames(), dg.pools)
	dg.lt.named = a.namedLive(d.Device, t)
	var blocks []block
	for _, b := range t.live {
		if b.seq <= t.peakAt {
			blocks = append(blocks, b)
		}
	}
	blocks = append(blocks, t.freedSincePeak...)
	sortBlocks(blocks)
	d.Categories, dg.peak = dg.lt.tally(blocks, d.PreTraceBytes-t.preFreed, d.Peak.TimeUS, true)
	cats := dg.lt.categoryTimeline(&d.Timeline, t, d.PreTraceBytes-t.preFreed)
	if a.keepFit || (len(t.ooms) > 0 && t.log.len() <= fitFindingEvents) {
		d.fit = dg.lt.fitTrace(t, cats, d) // for fit, and the OOM finding's plans (fit_oom.go)
	}
	for _, cb := range dg.peak {
		a.origins.at(cb.resolved()).addCat(cb.cat, cb.size)
	}
	for i, e := range t.ooms {
		od := oomDiag{o: ooms[i], atEnd: i == len(t.ooms)-1 && t.afterOOM == 0}
		if e.live != nil {
			live := append([]block(nil), e.live...)
			sortBlocks(live)
			var tracked int64
			for _, b := range live {
				tracked += b.size
			}
			od.cats, od.blocks = dg.lt.tally(live, max(0, od.o.Allocated-tracked), e.timeUS, false)
		}
		dg.ooms = append(dg.ooms, od)
	}
	return dg
}

func sortBlocks(bs []block) {
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].seq != bs[j].seq {
			return bs[i].seq < bs[j].seq
		}
		return bs[i].size < bs[j].size
	})
}

// findings derives what the snapshot shows; every front end reads them from
// the result.
func (a *analysis) findings(r *Result, diags []*devDiag) []Finding {
	var out []Finding
	for i, dg := range diags {
		dg.r, dg.d = r, &r.Devices[i]
		if dg.t == nil {
			continue
		}
		frag := dg.fragmentation()
		leak, leakSites := dg.leak()
		large := dg.largeAllocation()
		act := dg.activationPeak()
		cache := dg.cacheGrowth(leakSites)
		unbounded := dg.unboundedCache(leakSites)
		accum := dg.loopAccumulation(leakSites)
		state := dg.optimizerState()
		for j := range dg.ooms {
			out = append(out, dg.oomFinding(j, leak != nil))
		}
		out = append(out, frag...)
		out = append(out, large...)
		out = append(out, act...)
		if leak != nil {
			out = append(out, *leak)
		}
		out = append(out, cache...)
		out = append(out, unbounded...)
		if accum != nil {
			out = append(out, *accum)
		}
		if state != nil {
			out = append(out, *state)
		}
	}
	return out
}

// capacity is the memory the device (or the process's cap) offers, and where
// that figure comes from: the caller, or the reserved memory at which the
// allocator failed (a lower bound: the cap lies between it and it plus the request).
func (dg *devDiag) capacity() (int64, string) {
	if dg.r.DeviceMemory > 0 {
		return dg.r.DeviceMemory, "given"
	}
	if len(dg.ooms) > 0 {
		return dg.ooms[0].o.Reserved, "oom"
	}
	return 0, ""
}

// place names an origin for evidence: its first user frame (or the line a
// backward pass was called from), else its innermost frame, else its phase label.
func (dg *devDiag) place(o int32) (file string, line int, note string) {
	uk, leaf := dg.a.siteKeys(o)
	if uk.kind == "user" {
		return uk.file, uk.line, uk.fn
	}
	if leaf.file != "" {
		return leaf.file, leaf.line, leaf.fn
	}
	return "", 0, uk.fn
}

// innermost is the allocating frame of an origin (the deepest recorded frame).
func (dg *devDiag) innermost(o int32) (profiler.Frame, bool) {
	p := dg.a.origins.path(o)
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].File != "" {
			return p[i], true
		}
	}
	return profiler.Frame{}, false
}

func pct(part, whole int64) int64 {
	if whole <= 0 {
		return 0
	}
	return (100*part + whole/2) / whole
}

func fb(n int64) string { return profiler.FormatBytes(n) }

// short names a line in a finding's words ("train.py:31", "cell [3]:5").
func (dg *devDiag) short(file string, line int) string {
	if file == "" {
		return "?"
	}
	return dg.a.origins.place(file, line)
}
