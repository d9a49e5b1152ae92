package analyze

import (
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// The allocator map: the caching allocator's segments and blocks, to scale,
// at the snapshot, at the peak and at the first out-of-memory error, so that
// fragmentation is a picture (profiler/flame/web/allocmap.js draws it).
//
// The snapshot says only how the segments look at the end. The state at an
// earlier moment T is the end state with everything after T undone: the
// segment events after T (an alloc removes its segment, a free puts it back;
// expandable segments' map and unmap likewise for their pages), and as the
// allocated blocks, the ones live at T — known to the replay without a second
// pass: the tracked blocks live at the end that were allocated by T plus those
// freed since the peak (tracker.freedSincePeak), or the copy taken at an OOM,
// plus the blocks from before the trace still alive at the end or freed after
// T. Whatever a segment holds besides them was free. PyTorch's memory_viz
// replays the trace backwards in the browser instead; here the one streaming
// pass keeps just the segment changes after the peak (changeLog).

// AllocatorMaps are one device's maps.
type AllocatorMaps struct {
	Device int        `json:"device"`
	Maps   []AllocMap `json:"maps"`
}

// AllocMap is the allocator at one moment.
type AllocMap struct {
	At       string `json:"at"` // "snapshot", "peak" or "oom"
	TimeUS   int64  `json:"time_us,omitempty"`
	Reserved int64  `json:"reserved"`
	// Allocated is in blocks handed out (pending frees included).
	Allocated        int64 `json:"allocated"`
	LargestFreeBlock int64 `json:"largest_free_block"`
	// Request is the failing allocation at an OOM, with its stream and what
	// the driver said was free on the device.
	Request    int64          `json:"request,omitempty"`
	Stream     int64          `json:"stream,omitempty"`
	DeviceFree int64          `json:"device_free,omitempty"`
	Segments   []AllocSegment `json:"segments"`
	// Lines are the user lines blocks were allocated at (AllocBlock.Line).
	Lines []string `json:"lines"`
	// Merged counts blocks drawn together to keep the map under maxMapBlocks;
	// OmittedSegments, the smallest segments left out past that many.
	Merged          int `json:"merged_blocks,omitempty"`
	OmittedSegments int `json:"omitted_segments,omitempty"`
	// Reconstructed: not read from the snapshot but replayed back to At;
	// requested sizes are the trace's and blocks are not split finer than
	// their requests.
	Reconstructed bool `json:"reconstructed,omitempty"`
}

// AllocSegment is one segment (an expandable segment: one mapped range).
type AllocSegment struct {
	Addr       uint64       `json:"address"`
	Size       int64        `json:"size"`
	Stream     int64        `json:"stream"`
	Pool       [2]int64     `json:"pool"` // nonzero: a private pool (CUDA graphs, MemPool)
	Expandable bool         `json:"expandable,omitempty"`
	Blocks     []AllocBlock `json:"blocks"`
}

// AllocBlock is a block at its offset in the segment. State is
// "allocated", "pending_free", "inactive_split" (free, in a segment that
// also holds allocated blocks: only a request that fits it can use it),
// "free" (a segment with nothing allocated: empty_cache would release it) or
// "mixed" (merged blocks of several states; Allocated says how much is in use).
type AllocBlock struct {
	Offset    int64  `json:"offset"`
	Size      int64  `json:"size"`
	Requested int64  `json:"requested,omitempty"` // allocated blocks: the rest of Size is rounding
	State     string `json:"state"`
	Line      int    `json:"line,omitempty"` // 1 + index into AllocMap.Lines
	Merged    int    `json:"merged,omitempty"`
	Allocated int64  `json:"allocated,omitempty"` // mixed blocks
}

// maxMapBlocks bounds each map: beyond it, runs of blocks narrower than a
// pixel of a 1,000,000-pixel drawing are merged (a map of 30,000 blocks is
// about 2 MB of JSON).
const maxMapBlocks = 30000

// maxChanges bounds the segment changes kept after the peak or an OOM; a
// trace with more gets no peak or OOM map.
const maxChanges = 1 << 18

// change is a segment event, or the free of a block from before the trace.
type change struct {
	seq       int64
	action    profiler.Action
	addr      uint64
	size, req uint64
	stream    int64
}

// changeLog keeps the changes after the current peak, and once an OOM has
// happened, everything after the first one.
type changeLog struct {
	list     []change
	oom      bool
	overflow bool
}

func (c *changeLog) add(e *profiler.Event) {
	c.push(change{seq: e.Seq, action: e.Action, addr: e.Addr, size: e.Size, stream: e.Stream})
}

func (c *changeLog) preFree(e *profiler.Event, b block) {
	c.push(change{seq: e.Seq, action: profiler.ActFreeCompleted, addr: b.addr, size: uint64(b.size), req: b.req, stream: e.Stream})
}

func (c *changeLog) push(x change) {
	if len(c.list) >= maxChanges {
		c.overflow = true
		return
	}
	c.list = append(c.list, x)
}

// peakAt drops what happened before a new peak, unless an OOM needs it.
func (c *changeLog) peakAt(int64) {
	if !c.oom {
		c.list = c.list[:0]
	}
}

// keepFrom marks the first OOM: from now on nothing is dropped.
func (c *changeLog) keepFrom(int64) { c.oom = true }

// allocatorMaps builds a device's maps.
func (a *analysis) allocatorMaps(dev int, t *tracker, snap *torchsnap.Snapshot) AllocatorMaps {
	out := AllocatorMaps{Device: dev, Maps: []AllocMap{}}
	var segs []profiler.Segment
	for _, s := range snap.Segments {
		if s.Device == dev {
			segs = append(segs, s)
		}
	}
	out.Maps = append(out.Maps, a.snapshotMap(segs, t))
	if t == nil || t.changes.overflow {
		return out
	}
	if t.peakAt >= 0 {
		live := t.liveBy(t.peakAt)
		live = append(live, t.freedSincePeak...)
		m := a.replayedMap("peak", t.peakT, segs, t, t.peakAt, live)
		out.Maps = append(out.Maps, m)
	}
	for _, o := range t.ooms {
		if o.live == nil {
			continue
		}
		m := a.replayedMap("oom", o.timeUS, segs, t, o.seq, append([]block(nil), o.live...))
		m.Request, m.Stream, m.DeviceFree = o.requested, o.stream, int64(o.deviceFree)
		out.Maps = append(out.Maps, m)
		break // the first OOM: the one the program failed at
	}
	return out
}

// liveBy lists the tracked blocks live at the end that were allocated by seq.
func (t *tracker) liveBy(seq int64) []block {
	var out []block
	for _, b := range t.live {
		if b.seq <= seq {
			out = append(out, b)
		}
	}
	return out
}
