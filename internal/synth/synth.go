// Package synth makes large CUDA memory snapshots from a real one, for
// benchmarks and tests: it repeats the steps of a recorded device-0 trace, with
// shifted times and addresses, until the trace holds the number of entries
// asked for, and streams the pickle out, so a 50-million-entry snapshot (about
// 4.4 GB) is written in the memory the source takes.
//
// The result stays a snapshot the analyser can read as a real one:
//
//   - Repetition k of R (k = 0..R-1) has its times shifted by
//     (k-(R-1))·(span+1000 µs) and its addresses by (R-1-k)·S, where S is the
//     smallest power of two above the span of every address in the source. The
//     last repetition is the source itself, so the source's segments (copied as
//     they are) describe the end of the trace; earlier repetitions use address
//     ranges no other repetition touches.
//   - Frees of blocks the source never allocated (blocks from before its trace
//     began) appear once, unshifted, in repetition 0. segment_alloc,
//     segment_free, segment_map, segment_unmap, oom and snapshot events appear
//     only in the last repetition. Every repetition but the last ends with
//     free_requested and free_completed for its blocks still alive, so the live
//     set never grows from one repetition to the next.
//   - The trace is cut to exactly the number of entries asked for by starting
//     partway into repetition 0, as a ring buffer that wrapped would: frees of
//     blocks whose allocation was cut off read as frees of pre-trace blocks.
//   - Frame dicts and frames lists are written once each and shared through the
//     memo afterwards, dict keys and action names are shared strings, and entry
//     dicts hold action, addr (device_free for oom), size, stream, time_us,
//     compile_context 'N/A', user_metadata and frames in that order, as
//     PyTorch's own snapshots do.
//   - The top-level dict holds segments, device_traces, allocator_settings (the
//     scalar settings, rebuilt with their types) and external_annotations (the
//     source's, repeated with each repetition's time shift for at most the last
//     100 repetitions).
package synth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"sort"
	"strconv"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// Options control a generation.
type Options struct {
	Entries  int64                   // device-0 trace entries to write
	Progress func(done, total int64) // entries written so far, called every 1<<20 entries
	// MaxAnnotatedReps bounds the repetitions whose annotations are written
	// (the last ones); 0 means 100.
	MaxAnnotatedReps int
	// AnnotationsBeforeTrace keeps the annotations of repetition 0 that fall
	// before its cut, as PyTorch's annotation ring does when it reaches further
	// back than the trace's (the 5M-entry fixture has 31 such steps).
	AnnotationsBeforeTrace bool
}

// Result describes what was written.
type Result struct {
	Entries       int64            `json:"entries"`        // device-0 trace entries written
	Bytes         int64            `json:"bytes"`          // size of the pickle
	SourceEntries int64            `json:"source_entries"` // device-0 trace entries in the source
	Reps          int              `json:"repetitions"`    // repetitions begun, the first possibly partial
	PerRep        int64            `json:"per_repetition"` // entries in a middle repetition
	Skipped       int64            `json:"skipped"`        // leading entries of repetition 0 cut off
	AddrStride    uint64           `json:"addr_stride"`    // S, the address shift between repetitions
	TimeStride    int64            `json:"time_stride_us"` // span+1000, the time shift between repetitions
	Actions       map[string]int64 `json:"actions"`        // device-0 entries written, by action
	Annotations   int64            `json:"annotations"`
}

// Event classes: how an event of the source trace repeats.
const (
	clsRepeat  = iota // every repetition, shifted
	clsPre            // a free of a pre-trace block: repetition 0 only, address unshifted
	clsLast           // segment events, oom, snapshot: the last repetition only
	clsEndFree        // made up: a free at the end of a repetition but the last
)

// event is a trace entry of the source, kept compactly.
type event struct {
	addr, size, devFree uint64
	time, stream        int64
	stack               profiler.StackID
	meta                uint32 // index into source.metas; 0 is ""
	act                 profiler.Action
	class               uint8
}

type source struct {
	snap   *torchsnap.Snapshot
	frames *profiler.Frames
	traces [][]event // by trace number
	metas  []string
}

func load(path string) (*source, error) {
	s := &source{frames: profiler.NewFrames(), metas: []string{""}}
	metaIdx := map[string]uint32{"": 0}
	snap, err := torchsnap.ReadFile(path, s.frames, func(trace int, e *profiler.Event) error {
		for trace >= len(s.traces) {
			s.traces = append(s.traces, nil)
		}
		m, ok := metaIdx[e.UserMeta]
		if !ok {
			m = uint32(len(s.metas))
			s.metas = append(s.metas, e.UserMeta)
			metaIdx[e.UserMeta] = m
		}
		s.traces[trace] = append(s.traces[trace], event{addr: e.Addr, size: e.Size, devFree: e.DeviceFree,
			time: e.TimeUS, stream: e.Stream, stack: e.Stack, meta: m, act: e.Action})
		return nil
	}, torchsnap.Options{})
	if err != nil {
		return nil, err
	}
	s.snap = snap
	return s, nil
}

// plan is the device-0 trace to write.
type plan struct {
	evs                 []event // the source's device-0 events, then the end-of-repetition frees
	first, middle, last []int32 // indices into evs for repetition 0, the middle ones, the last
	whole               []int32 // R == 1: the source as it is
	reps                int
	drop                int64 // entries of the first repetition not written
	addrStride          uint64
	timeStride          int64
	perRep              int64
}

func makePlan(src []event, segs []profiler.Segment, n int64) (*plan, error) {
	if n < 0 {
		return nil, errors.New("a negative number of entries")
	}
	p := &plan{evs: src}
	live := map[uint64]int32{}
	requested := map[int32]bool{}
	var minAddr, maxEnd uint64 = math.MaxUint64, 0
	span := func(a, size uint64) {
		minAddr = min(minAddr, a)
		maxEnd = max(maxEnd, a+max(size, 1))
	}
	for _, s := range segs {
		span(s.Addr, s.TotalSize)
	}
	for i := range p.evs {
		e := &p.evs[i]
		switch e.act {
		case profiler.ActAlloc:
			live[e.addr] = int32(i) // over a live address: the old block's free fell outside the trace
			e.class = clsRepeat
		case profiler.ActFreeRequested:
			e.class = clsPre
			if j, ok := live[e.addr]; ok {
				requested[j] = true
				e.class = clsRepeat
			}
		case profiler.ActFreeCompleted:
			e.class = clsPre
			if _, ok := live[e.addr]; ok {
				delete(live, e.addr)
				e.class = clsRepeat
			}
		case profiler.ActSegmentAlloc, profiler.ActSegmentFree, profiler.ActSegmentMap, profiler.ActSegmentUnmap,
			profiler.ActOOM, profiler.ActSnapshot:
			e.class = clsLast
		default:
			e.class = clsRepeat
		}
		if e.act != profiler.ActOOM && e.act != profiler.ActSnapshot {
			span(e.addr, e.size)
		}
	}
	if len(src) == 0 {
		if n > 0 {
			return nil, errors.New("the source's device-0 trace is empty")
		}
		p.reps = 1
		return p, nil
	}
	t0, t1 := src[0].time, src[len(src)-1].time
	for _, e := range src {
		t0, t1 = min(t0, e.time), max(t1, e.time)
	}
	p.timeStride = t1 - t0 + 1000
	if maxEnd > minAddr {
		p.addrStride = 1 << bits.Len64(maxEnd-minAddr) // a power of two above the span
	} else {
		p.addrStride = 1 << 20
	}

	// Blocks still alive at the end, in the order they were allocated, get a
	// free at the end of every repetition but the last.
	alive := make([]int32, 0, len(live))
	for _, i := range live {
		alive = append(alive, i)
	}
	sort.Slice(alive, func(a, b int) bool { return alive[a] < alive[b] })
	var ends []int32
	for _, i := range alive {
		a := src[i]
		fe := event{addr: a.addr, size: a.size, stream: a.stream, stack: a.stack, time: t1 + 500, class: clsEndFree}
		if !requested[i] {
			fe.act = profiler.ActFreeRequested
			ends = append(ends, int32(len(p.evs)))
			p.evs = append(p.evs, fe)
		}
		fe.act = profiler.ActFreeCompleted
		ends = append(ends, int32(len(p.evs)))
		p.evs = append(p.evs, fe)
	}
	for i, e := range src {
		switch e.class {
		case clsRepeat:
			p.first = append(p.first, int32(i))
			p.middle = append(p.middle, int32(i))
			p.last = append(p.last, int32(i))
		case clsPre:
			p.first = append(p.first, int32(i))
		case clsLast:
			p.last = append(p.last, int32(i))
		}
		p.whole = append(p.whole, int32(i))
	}
	p.first = append(p.first, ends...)
	p.middle = append(p.middle, ends...)

	whole, first, middle, last := int64(len(p.whole)), int64(len(p.first)), int64(len(p.middle)), int64(len(p.last))
	p.perRep = middle
	switch {
	case n <= whole:
		p.reps, p.drop = 1, whole-n
		return p, nil
	case n <= first+last:
		p.reps = 2
	case middle == 0:
		return nil, fmt.Errorf("the source trace has no allocations or frees to repeat; it cannot reach %d entries", n)
	default:
		p.reps = 2 + int((n-first-last+middle-1)/middle)
	}
	p.drop = first + int64(p.reps-2)*middle + last - n
	if r := uint64(p.reps - 1); r > (math.MaxUint64-maxEnd)/p.addrStride || int64(r) > math.MaxInt64/4/p.timeStride {
		return nil, fmt.Errorf("%d repetitions do not fit in 64-bit addresses and times", p.reps)
	}
	return p, nil
}

// Generate writes a snapshot whose device-0 trace holds opt.Entries entries,
// made from the snapshot at sourcePath, to out.
func Generate(out io.Writer, sourcePath string, opt Options) (*Result, error) {
	src, err := load(sourcePath)
	if err != nil {
		return nil, err
	}
	dev0 := -1
	for t, d := range src.snap.TraceDevices {
		if d == 0 {
			dev0 = t
		}
	}
	var trace []event
	if dev0 >= 0 && dev0 < len(src.traces) {
		trace = src.traces[dev0]
	}
	p, err := makePlan(trace, src.snap.Segments, opt.Entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sourcePath, err)
	}
	g := &gen{src: src, p: p, opt: opt, res: &Result{SourceEntries: int64(len(trace)), Reps: p.reps,
		PerRep: p.perRep, Skipped: p.drop, AddrStride: p.addrStride, TimeStride: p.timeStride,
		Actions: map[string]int64{}}}
	if g.opt.MaxAnnotatedReps <= 0 {
		g.opt.MaxAnnotatedReps = 100
	}
	cw := &countWriter{w: out}
	g.w = pickle.NewWriter(cw)
	g.init()
	g.write(dev0)
	if err := g.w.Close(); err != nil {
		return nil, err
	}
	g.res.Bytes = cw.n
	g.res.Entries = g.written
	for a, n := range g.actions {
		if n > 0 {
			g.res.Actions[profiler.Action(a).String()] = n
		}
	}
	return g.res, nil
}

// GenerateFile writes the snapshot to path through a bufio.Writer; on failure
// it removes what it wrote (when path is a regular file).
func GenerateFile(path, sourcePath string, opt Options) (*Result, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	res, err := Generate(bw, sourcePath, opt)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if fi, serr := os.Stat(path); serr == nil && fi.Mode().IsRegular() {
			os.Remove(path) // not /dev/null or a pipe
		}
		return nil, err
	}
	return res, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// gen writes one snapshot.
type gen struct {
	src *source
	p   *plan
	opt Options
	res *Result
	w   *pickle.Writer

	stacks  []pickle.Memo // by StackID
	frames  []pickle.Memo // by FrameID
	keys    [nKeys]pickle.Memo
	acts    [16]pickle.Memo
	actions [16]int64
	written int64
}

// The strings every entry writes, shared through the memo.
const (
	kAction = iota
	kAddr
	kDeviceFree
	kSize
	kStream
	kTimeUS
	kCompileContext
	kUserMetadata
	kFrames
	kEmpty
	nKeys
)

var keyNames = [nKeys]string{"action", "addr", "device_free", "size", "stream", "time_us", "compile_context",
	"user_metadata", "frames", ""}

func (g *gen) init() {
	g.stacks = make([]pickle.Memo, g.src.frames.NumStacks())
	for i := range g.stacks {
		g.stacks[i] = pickle.NoMemo
	}
	g.frames = make([]pickle.Memo, g.src.frames.NumFrames())
	for i := range g.frames {
		g.frames[i] = pickle.NoMemo
	}
	for i := range g.keys {
		g.keys[i] = pickle.NoMemo
	}
	for i := range g.acts {
		g.acts[i] = pickle.NoMemo
	}
}

// key writes a shared string, remembering its memo slot.
func (g *gen) key(k int) {
	if m := g.keys[k]; m >= 0 {
		g.w.Get(m)
		return
	}
	g.keys[k] = g.w.Key(keyNames[k])
}

func (g *gen) stack(id profiler.StackID) {
	if m := g.stacks[id]; g.w.CanGet(m) {
		g.w.Get(m)
		return
	}
	g.stacks[id] = g.w.BeginList()
	for _, f := range g.src.frames.StackAt(id) {
		if m := g.frames[f]; g.w.CanGet(m) {
			g.w.Get(m)
			continue
		}
		fr := g.src.frames.FrameAt(f)
		g.frames[f] = g.w.BeginDictOf(3)
		g.w.Key("name")
		g.w.Str(fr.Func)
		g.w.Key("filename")
		g.w.Str(fr.File)
		g.w.Key("line")
		g.w.Int(int64(fr.Line))
		g.w.EndDict()
	}
	g.w.EndList()
}

func (g *gen) write(dev0 int) {
	w := g.w
	w.BeginDictOf(4)
	w.Key("segments")
	g.segments()

	w.Key("device_traces")
	devs := 1
	for _, d := range g.src.snap.TraceDevices {
		devs = max(devs, d+1)
	}
	w.BeginListOf(int64(devs))
	for d := 0; d < devs; d++ {
		if d == 0 {
			g.trace0()
			continue
		}
		t := -1
		for i, td := range g.src.snap.TraceDevices {
			if td == d {
				t = i
			}
		}
		if t < 0 || t >= len(g.src.traces) {
			w.BeginListOf(0)
			w.EndList()
			continue
		}
		w.BeginListOf(int64(len(g.src.traces[t])))
		for i := range g.src.traces[t] {
			g.entry(&g.src.traces[t][i], 0, 0, false)
		}
		w.EndList()
	}
	w.EndList()

	w.Key("allocator_settings")
	g.settings()
	w.Key("external_annotations")
	g.annotations()
	w.EndDict()
}

func (g *gen) trace0() {
	g.w.BeginListOf(g.opt.Entries)
	g.p.each(func(e *event, addrShift uint64, timeShift int64) {
		g.entry(e, addrShift, timeShift, true)
	})
	g.w.EndList()
}

// each calls f for every device-0 entry to write, in order, with the shifts to
// apply to its address and time.
func (p *plan) each(f func(e *event, addrShift uint64, timeShift int64)) {
	for k := 0; k < p.reps; k++ {
		seq := p.middle
		switch {
		case p.reps == 1:
			seq = p.whole
		case k == 0:
			seq = p.first
		case k == p.reps-1:
			seq = p.last
		}
		if k == 0 {
			seq = seq[p.drop:]
		}
		addrShift := uint64(p.reps-1-k) * p.addrStride
		timeShift := int64(k-(p.reps-1)) * p.timeStride
		for _, i := range seq {
			e := &p.evs[i]
			if e.class == clsPre {
				f(e, 0, timeShift)
			} else {
				f(e, addrShift, timeShift)
			}
		}
	}
}

// entry writes one trace entry dict.
func (g *gen) entry(e *event, addrShift uint64, timeShift int64, count bool) {
	w := g.w
	w.BeginDict()
	g.key(kAction)
	if m := g.acts[e.act]; m >= 0 {
		w.Get(m)
	} else {
		g.acts[e.act] = w.Key(e.act.String())
	}
	if e.act == profiler.ActOOM {
		g.key(kDeviceFree)
		w.Uint(e.devFree)
	} else {
		g.key(kAddr)
		w.Uint(e.addr + addrShift)
	}
	g.key(kSize)
	w.Uint(e.size)
	g.key(kStream)
	w.Int(e.stream)
	g.key(kTimeUS)
	w.Int(e.time + timeShift)
	g.key(kCompileContext)
	w.Str("N/A") // a new str per entry, as PyTorch writes it
	g.key(kUserMetadata)
	if e.meta == 0 {
		g.key(kEmpty)
	} else {
		w.Str(g.src.metas[e.meta])
	}
	if e.act != profiler.ActSnapshot { // PyTorch's snapshot entries carry no frames
		g.key(kFrames)
		g.stack(e.stack)
	}
	w.EndDict()
	if count {
		g.actions[e.act]++
		g.written++
		if g.opt.Progress != nil && g.written&(1<<20-1) == 0 {
			g.opt.Progress(g.written, g.opt.Entries)
		}
	}
}

func (g *gen) segments() {
	w := g.w
	segs := g.src.snap.Segments
	w.BeginListOf(int64(len(segs)))
	for i := range segs {
		s := &segs[i]
		w.BeginDictOf(12)
		w.Key("device")
		w.Int(int64(s.Device))
		w.Key("address")
		w.Uint(s.Addr)
		w.Key("total_size")
		w.Uint(s.TotalSize)
		w.Key("allocated_size")
		w.Uint(s.Allocated)
		w.Key("active_size")
		w.Uint(s.Active)
		w.Key("requested_size")
		w.Uint(s.Requested)
		w.Key("stream")
		w.Int(s.Stream)
		w.Key("segment_type")
		w.Key(s.Type)
		w.Key("segment_pool_id")
		w.BeginTuple()
		w.Int(s.PoolID[0])
		w.Int(s.PoolID[1])
		w.EndTuple()
		w.Key("is_expandable")
		w.Bool(s.Expandable)
		w.Key("frames")
		g.stack(0)
		w.Key("blocks")
		w.BeginListOf(int64(len(s.Blocks)))
		for _, b := range s.Blocks {
			w.BeginDictOf(5)
			w.Key("address")
			w.Uint(b.Addr)
			w.Key("size")
			w.Uint(b.Size)
			w.Key("requested_size")
			w.Uint(b.Requested)
			w.Key("state")
			w.Key(b.State.String())
			w.Key("frames")
			g.stack(b.Stack)
			w.EndDict()
		}
		w.EndList()
		w.EndDict()
	}
	w.EndList()
}

// settingKinds are PyTorch's allocator settings in the order it writes them,
// with their Python types; Settings.Raw keeps them only as text.
var settingKinds = []struct {
	name string
	kind byte // s str, i int, f float, b bool
}{
	{"PYTORCH_CUDA_ALLOC_CONF", 's'},
	{"max_split_size", 'i'},
	{"garbage_collection_threshold", 'f'},
	{"expandable_segments", 'b'},
	{"pinned_num_register_threads", 'i'},
	{"release_lock_on_cudamalloc", 'b'},
	{"pinned_use_cuda_host_register", 'b'},
	{"graph_capture_record_stream_reuse", 'b'},
}

func (g *gen) settings() {
	w := g.w
	st := g.src.snap.Settings
	raw := map[string]string{}
	for k, v := range st.Raw {
		raw[k] = v
	}
	if len(raw) == 0 {
		raw["PYTORCH_CUDA_ALLOC_CONF"] = st.AllocConf
		raw["max_split_size"] = strconv.FormatInt(st.MaxSplitSize, 10)
		raw["expandable_segments"] = strconv.FormatBool(st.ExpandableSegments)
	}
	w.BeginDict()
	for _, s := range settingKinds {
		v, ok := raw[s.name]
		if !ok {
			continue
		}
		delete(raw, s.name)
		w.Key(s.name)
		settingValue(w, v, s.kind)
	}
	rest := make([]string, 0, len(raw))
	for k := range raw {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		w.Key(k)
		settingValue(w, raw[k], 0)
	}
	w.EndDict()
}

// settingValue writes a setting kept as fmt.Sprint text back with a type: the
// one given, or else the first of bool, int, float, None that parses.
func settingValue(w *pickle.Writer, v string, kind byte) {
	switch kind {
	case 's':
		w.Key(v)
		return
	case 'i':
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			w.Int(n)
			return
		}
	case 'f':
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			w.Float(f)
			return
		}
	case 'b':
		if b, err := strconv.ParseBool(v); err == nil {
			w.Bool(b)
			return
		}
	}
	if v == "true" || v == "false" {
		w.Bool(v == "true")
	} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		w.Int(n)
	} else if f, err := strconv.ParseFloat(v, 64); err == nil {
		w.Float(f)
	} else if v == "<nil>" {
		w.None()
	} else {
		w.Key(v)
	}
}

func (g *gen) annotations() {
	w, p := g.w, g.p
	anns := g.src.snap.Annotations
	from := max(0, p.reps-g.opt.MaxAnnotatedReps)
	firstT := int64(math.MinInt64) // annotations of a repetition 0 that was cut start with its first entry
	if p.drop > 0 {
		seq := p.first
		if p.reps == 1 {
			seq = p.whole
		}
		if p.drop < int64(len(seq)) {
			firstT = p.evs[seq[p.drop]].time - int64(p.reps-1)*p.timeStride
		} else {
			firstT = math.MaxInt64
		}
	}
	w.BeginList()
	for k := from; k < p.reps; k++ {
		shift := int64(k-(p.reps-1)) * p.timeStride
		for _, a := range anns {
			t := a.TimeUS + shift
			if k == 0 && t < firstT && !g.opt.AnnotationsBeforeTrace {
				continue
			}
			w.BeginDictOf(4)
			w.Key("stage")
			if a.Start {
				w.Key("START")
			} else {
				w.Key("END")
			}
			w.Key("name")
			w.Str(a.Name)
			w.Key("device")
			w.Int(int64(a.Device))
			w.Key("time_us")
			w.Int(t)
			w.EndDict()
			g.res.Annotations++
		}
	}
	w.EndList()
}
