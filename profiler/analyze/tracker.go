package analyze

import (
	"math"

	"github.com/vramscope/vramscope/profiler"
)

// block is one allocation the replay has seen and not yet seen freed.
type block struct {
	size   int64
	origin int32            // see origins; unset while gap is set
	gap    *gap             // allocated with no user frame: resolved when the gap closes
	stack  profiler.StackID // the stack recorded, for gap blocks
	seq    int64
	t      int64 // allocation time; blocks from before the trace: math.MinInt64
	ft     int64 // free time, once freed (blocks kept for the peak or an OOM); 0 while live
	li     int32 // index of its allocation in the level log; -1: not logged
	addr   uint64
	req    uint64 // bytes requested (the trace's size; size is the block's)
}

func (b *block) resolved() int32 {
	if b.gap != nil {
		return b.gap.origins[b.stack]
	}
	return b.origin
}

// gap is a run of allocations with no frame in user code — no Python stack at
// all (autograd's backward thread, C++), or only library frames (activation
// checkpointing recomputing a layer inside backward) — between two allocations
// whose stacks reach user code.
type gap struct {
	left, right profiler.StackID
	firstTime   int64
	stats       map[profiler.StackID]*origin // by recorded stack (0: none)
	origins     map[profiler.StackID]int32   // filled when the gap closes
}

// tracker replays one device trace. It keeps only what is live, the blocks live
// at the highest point so far that have since been freed, and per-origin totals,
// so its memory does not grow with the length of the trace.
type tracker struct {
	a      *analysis
	trace  int
	live   map[uint64]block // by value: no allocation per block
	cur    int64            // allocated bytes relative to the unknown start
	rcur   int64            // reserved bytes relative to the unknown start
	peak   int64
	peakAt int64 // Seq of the event that reached the peak; -1 before any event
	peakT  int64
	// freedSincePeak holds blocks live at the peak that were freed after it,
	// including blocks allocated before the trace began (negative seq).
	freedSincePeak []block
	preFreed       int64 // bytes of pre-trace blocks freed during the trace
	lastFramed     profiler.StackID
	open           *gap
	timeline       *timeline
	moments        *momentGrid // live bytes by origin over time (moments.go)
	ooms           []oomEvent
	events         int64
	firstT, lastT  int64
	// log is the allocated level after every alloc and free: steps, their
	// levels and lifetimes are read from it.
	log       levelLog
	truncated bool // the log stopped at math.MaxInt32 entries (block.li's range)
	// replaced maps an allocation logged over a live address (its free fell
	// outside the ring) to the allocation it ended.
	replaced map[int32]int32
	afterOOM int64 // allocs and frees replayed since the last OOM event
	// changes undo the segments back to the peak or the first OOM (allocmap.go).
	changes changeLog
}

type oomEvent struct {
	timeUS, requested int64
	deviceFree        uint64
	stack             profiler.StackID
	cur, rcur         int64
	live              []block // tracked blocks live at the failure (the first few OOMs)
	seq               int64
	stream            int64
}

// maxOOMLive bounds how many OOM events keep a copy of the live blocks.
const maxOOMLive = 4

func newTracker(a *analysis, trace int) *tracker {
	return &tracker{a: a, trace: trace, live: map[uint64]block{}, peakAt: -1, timeline: newTimeline(), moments: newMomentGrid()}
}

// event replays one trace event; user says whether its stack reaches user code
// (decided on the decoding side, which owns the frame table).
func (t *tracker) event(e *profiler.Event, user bool) {
	if t.events == 0 {
		t.firstT = e.TimeUS
	}
	t.events++
	t.lastT = e.TimeUS
	switch e.Action {
	case profiler.ActAlloc:
		t.alloc(e, user)
	case profiler.ActFreeCompleted:
		t.free(e)
	case profiler.ActSegmentAlloc, profiler.ActSegmentMap:
		t.rcur += int64(e.Size)
		t.changes.add(e)
		t.framed(e, user)
	case profiler.ActSegmentFree, profiler.ActSegmentUnmap:
		t.rcur -= int64(e.Size)
		t.changes.add(e)
	case profiler.ActOOM:
		o := oomEvent{timeUS: e.TimeUS, requested: int64(e.Size), deviceFree: e.DeviceFree,
			stack: e.Stack, cur: t.cur, rcur: t.rcur, seq: e.Seq, stream: e.Stream}
		t.changes.keepFrom(e.Seq)
		if len(t.ooms) < maxOOMLive {
			o.live = make([]block, 0, len(t.live))
			for _, b := range t.live {
				o.live = append(o.live, b)
			}
		}
		t.ooms = append(t.ooms, o)
		t.afterOOM = 0
		t.framed(e, user)
	}
	t.timeline.add(e.TimeUS, t.cur, t.rcur)
}

func (t *tracker) alloc(e *profiler.Event, user bool) {
	size := blockSize(e.Size)
	b := block{size: size, seq: e.Seq, t: e.TimeUS, addr: e.Addr, req: e.Size}
	if !user {
		if t.open == nil {
			t.open = &gap{left: t.lastFramed, firstTime: e.TimeUS, stats: map[profiler.StackID]*origin{}}
		}
		g := t.open
		st := g.stats[e.Stack]
		if st == nil {
			st = &origin{}
			g.stats[e.Stack] = st
		}
		st.allocBytes += size
		st.allocs++
		st.maxAlloc = max(st.maxAlloc, size)
		b.gap, b.stack = g, e.Stack
	} else {
		t.framed(e, user)
		b.origin = int32(e.Stack)
		t.a.origins.countAlloc(b.origin, size)
	}
	if old, ok := t.live[e.Addr]; ok {
		// An alloc over a live address means the free fell outside the ring; drop the old one.
		t.cur -= old.size
		t.moments.add(e.TimeUS, keyOf(&old), -old.size)
		if old.seq <= t.peakAt {
			old.ft = e.TimeUS
			t.freedSincePeak = append(t.freedSincePeak, old)
		}
	}
	t.cur += size
	t.moments.add(e.TimeUS, keyOf(&b), size)
	li := t.log.len()
	t.logLevel(e.TimeUS, uint32(e.Stack)+1, 0)
	b.li = -1
	if t.log.len() > li {
		b.li = int32(li)
		if old, ok := t.live[e.Addr]; ok && old.li >= 0 {
			if t.replaced == nil {
				t.replaced = map[int32]int32{}
			}
			t.replaced[int32(li)] = old.li
		}
	}
	t.live[e.Addr] = b
	if t.cur > t.peak {
		t.peak, t.peakAt, t.peakT = t.cur, e.Seq, e.TimeUS
		t.freedSincePeak = t.freedSincePeak[:0]
		t.changes.peakAt(e.Seq)
	}
}

// framed notes activity in user code: it closes any open gap.
func (t *tracker) framed(e *profiler.Event, user bool) {
	if !user {
		return
	}
	if t.open != nil {
		t.closeGap(e.Stack)
	}
	t.lastFramed = e.Stack
}

func (t *tracker) closeGap(right profiler.StackID) {
	g := t.open
	t.open = nil
	g.right = right
	g.origins = make(map[profiler.StackID]int32, len(g.stats))
	for stack, st := range g.stats {
		id := t.a.origins.gapOrigin(g, stack)
		g.origins[stack] = id
		o := t.a.origins.at(id)
		o.allocBytes += st.allocBytes
		o.allocs += st.allocs
		o.maxAlloc = max(o.maxAlloc, st.maxAlloc)
	}
	g.stats = nil
}

func (t *tracker) free(e *profiler.Event) {
	b, ok := t.live[e.Addr]
	if !ok {
		// Allocated before the trace began: it was live all along until now.
		// Its frames (context="all") are where it was freed, not where it was made.
		b = block{size: blockSize(e.Size), seq: -1, origin: t.a.origins.preTrace(0), t: math.MinInt64, li: -1,
			addr: e.Addr, req: e.Size}
		t.preFreed += b.size
		t.changes.preFree(e, b)
	} else {
		delete(t.live, e.Addr)
	}
	t.cur -= b.size
	t.moments.add(e.TimeUS, keyOf(&b), -b.size)
	if b.seq <= t.peakAt {
		b.ft = e.TimeUS
		t.freedSincePeak = append(t.freedSincePeak, b)
	}
	t.logLevel(e.TimeUS, 0, int(b.li)+1)
}

func (t *tracker) logLevel(at int64, stack uint32, back int) {
	t.afterOOM++
	if t.truncated {
		return
	}
	rel := int64(bucketOf(at, t.firstT, 1)) // no overflow (the decoder bounds times to ±2^53 µs); 0 before the first
	if n := t.log.len(); n > 0 {
		rel = max(rel, t.log.last.t) // clocks of different threads can step back a little
	}
	if t.log.len() >= math.MaxInt32 { // block.li is an int32
		t.truncated = true
		return
	}
	t.log.add(logEntry{t: rel, stack: stack, cur: t.cur, back: back})
}

// finish closes the replay; the snapshot's segments say what was alive at the end.
func (t *tracker) finish() {
	if t.open != nil {
		t.closeGap(0)
	}
}

// blockSize is the allocator's block for a request: traces record the bytes
// requested, while PyTorch's "allocated" counts blocks, which are multiples of
// 512 bytes (a large request can get a little more when its segment is not
// split; the snapshot's segments give those exactly at the end).
func blockSize(requested uint64) int64 {
	const minBlock = 512
	if requested < minBlock {
		return minBlock
	}
	return int64((requested + minBlock - 1) / minBlock * minBlock)
}
