package analyze

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// mapBuilder collects one map's lines (a block's user line, interned).
type mapBuilder struct {
	a     *analysis
	m     AllocMap
	index map[string]int
}

func newMapBuilder(a *analysis, at string, timeUS int64) *mapBuilder {
	return &mapBuilder{a: a, m: AllocMap{At: at, TimeUS: timeUS, Segments: []AllocSegment{}, Lines: []string{}},
		index: map[string]int{}}
}

// line interns the user line of origin o (0: none known).
func (mb *mapBuilder) line(o int32) int {
	w := mb.a.where(o)
	if w == "" {
		return 0
	}
	if k, ok := mb.index[w]; ok {
		return k
	}
	mb.m.Lines = append(mb.m.Lines, w)
	mb.index[w] = len(mb.m.Lines)
	return len(mb.m.Lines)
}

// where is an origin's place in words: its innermost user line and
// function, or a synthetic origin's label ("[backward pass of train.py:23]").
func (a *analysis) where(o int32) string {
	if o >= 0 {
		if f, ok := a.origins.userFrame(profiler.StackID(o)); ok {
			return a.origins.placeOf(f) + " " + f.Func
		}
		return ""
	}
	return a.origins.syn[-o-1].label
}

// snapshotMap is the snapshot's own segments, block by block.
func (a *analysis) snapshotMap(segs []profiler.Segment, t *tracker) AllocMap {
	mb := newMapBuilder(a, "snapshot", 0)
	for _, s := range segs {
		row := AllocSegment{Addr: s.Addr, Size: int64(s.TotalSize), Stream: s.Stream, Pool: s.PoolID, Expandable: s.Expandable}
		used := false
		for _, b := range s.Blocks {
			used = used || b.State != profiler.BlockInactive
		}
		for _, b := range s.Blocks {
			ab := AllocBlock{Offset: int64(b.Addr - s.Addr), Size: int64(b.Size), State: freeState(used)}
			if b.State != profiler.BlockInactive {
				ab.State, ab.Requested = "allocated", int64(b.Requested)
				if b.State == profiler.BlockActivePendingFree {
					ab.State = "pending_free"
				}
				ab.Line = mb.line(a.originAtEnd(t, b))
			}
			row.Blocks = append(row.Blocks, ab)
		}
		mb.add(row)
	}
	return mb.finish()
}

// originAtEnd is the origin of a block alive at the end.
func (a *analysis) originAtEnd(t *tracker, b profiler.Block) int32 {
	if t != nil {
		if lb, ok := t.live[b.Addr]; ok {
			return lb.resolved()
		}
	}
	if b.Stack != 0 {
		return int32(b.Stack)
	}
	return a.origins.preTrace(0)
}

func freeState(segmentUsed bool) string {
	if segmentUsed {
		return "inactive_split"
	}
	return "free"
}

// span is a reserved address range while segments are replayed back.
type span struct {
	addr, size uint64
	stream     int64
	pool       [2]int64
	expandable bool
}

// replayedMap is the state at seq: the snapshot's segments with the changes
// after seq undone, holding live (the tracked blocks live at seq) and the
// blocks from before the trace that were still alive then.
func (a *analysis) replayedMap(at string, timeUS int64, segs []profiler.Segment, t *tracker, seq int64, live []block) AllocMap {
	spans := make([]span, 0, len(segs))
	for _, s := range segs {
		spans = append(spans, span{s.Addr, s.TotalSize, s.Stream, s.PoolID, s.Expandable})
	}
	// Blocks still alive at the end take their sizes from the snapshot: the
	// trace records requests, and a large request can get a whole unsplit
	// remainder. Those the trace never allocated were there all along.
	atEnd := map[uint64]profiler.Block{}
	for _, s := range segs {
		for _, b := range s.Blocks {
			if b.State == profiler.BlockInactive {
				continue
			}
			if _, tracked := t.live[b.Addr]; tracked {
				atEnd[b.Addr] = b
			} else {
				live = append(live, block{addr: b.Addr, size: int64(b.Size), req: b.Requested, origin: a.originAtEnd(nil, b)})
			}
		}
	}
	for i := range live {
		if sb, ok := atEnd[live[i].addr]; ok && t.live[live[i].addr].seq == live[i].seq {
			live[i].size, live[i].req = int64(sb.Size), sb.Requested
		}
	}
	ch := t.changes.list
	for i := len(ch) - 1; i >= 0 && ch[i].seq > seq; i-- {
		c := ch[i]
		switch c.action {
		case profiler.ActSegmentAlloc, profiler.ActSegmentMap:
			spans = cutSpan(spans, c.addr, c.size)
		case profiler.ActSegmentFree, profiler.ActSegmentUnmap:
			spans = append(spans, span{addr: c.addr, size: c.size, stream: c.stream, expandable: c.action == profiler.ActSegmentUnmap})
		case profiler.ActFreeCompleted:
			if at != "peak" { // the peak's are in freedSincePeak already
				live = append(live, block{addr: c.addr, size: int64(c.size), req: c.req, origin: a.origins.preTrace(0)})
			}
		}
	}
	mb := newMapBuilder(a, at, timeUS)
	mb.m.Reconstructed = true
	place(mb, joinSpans(spans), live)
	return mb.finish()
}

// cutSpan removes [addr, addr+size) from the spans (a segment's whole range,
// or the pages an expandable segment mapped).
func cutSpan(spans []span, addr, size uint64) []span {
	end := addr + size
	out := spans[:0:0]
	for _, s := range spans {
		sEnd := s.addr + s.size
		if sEnd <= addr || s.addr >= end {
			out = append(out, s)
			continue
		}
		if s.addr < addr {
			out = append(out, span{s.addr, addr - s.addr, s.stream, s.pool, s.expandable})
		}
		if sEnd > end {
			out = append(out, span{end, sEnd - end, s.stream, s.pool, s.expandable})
		}
	}
	return out
}

// joinSpans sorts the spans and joins adjacent pieces of expandable
// segments (pages mapped one after another are one segment).
func joinSpans(spans []span) []span {
	sort.Slice(spans, func(i, j int) bool { return spans[i].addr < spans[j].addr })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.expandable && out[n-1].expandable && out[n-1].addr+out[n-1].size == s.addr &&
			out[n-1].stream == s.stream {
			out[n-1].size += s.size
			continue
		}
		out = append(out, s)
	}
	return out
}

// place puts the live blocks into their spans and fills the rest with free
// blocks. A block outside every span (a trace that does not match its
// snapshot) is left out.
func place(mb *mapBuilder, spans []span, live []block) {
	sort.Slice(live, func(i, j int) bool { return live[i].addr < live[j].addr })
	k := 0
	for _, s := range spans {
		end := s.addr + s.size
		row := AllocSegment{Addr: s.addr, Size: int64(s.size), Stream: s.stream, Pool: s.pool, Expandable: s.expandable}
		for k < len(live) && live[k].addr < s.addr {
			k++
		}
		var blocks []AllocBlock
		at := s.addr
		for ; k < len(live) && live[k].addr < end; k++ {
			b := live[k]
			if b.addr < at {
				continue // overlaps the block before it: an address reused after a free the ring lost
			}
			if b.addr > at {
				blocks = append(blocks, AllocBlock{Offset: int64(at - s.addr), Size: int64(b.addr - at)})
			}
			size := min(uint64(b.size), end-b.addr)
			blocks = append(blocks, AllocBlock{Offset: int64(b.addr - s.addr), Size: int64(size), State: "allocated",
				Requested: int64(min(b.req, size)), Line: mb.line(b.resolved())})
			at = b.addr + size
		}
		if at < end {
			blocks = append(blocks, AllocBlock{Offset: int64(at - s.addr), Size: int64(end - at)})
		}
		used := false
		for _, b := range blocks {
			used = used || b.State != ""
		}
		for i := range blocks {
			if blocks[i].State == "" {
				blocks[i].State = freeState(used)
			}
		}
		row.Blocks = blocks
		mb.add(row)
	}
}

// add appends a segment and counts its totals.
func (mb *mapBuilder) add(row AllocSegment) {
	if row.Blocks == nil {
		row.Blocks = []AllocBlock{}
	}
	mb.m.Reserved += row.Size
	for _, b := range row.Blocks {
		switch b.State {
		case "allocated", "pending_free":
			mb.m.Allocated += b.Size
		default:
			mb.m.LargestFreeBlock = max(mb.m.LargestFreeBlock, b.Size)
		}
	}
	mb.m.Segments = append(mb.m.Segments, row)
}

// finish orders the segments and bounds the map's size.
func (mb *mapBuilder) finish() AllocMap {
	m := mb.m
	sort.Slice(m.Segments, func(i, j int) bool { return m.Segments[i].Addr < m.Segments[j].Addr })
	n := 0
	for _, s := range m.Segments {
		n += len(s.Blocks)
	}
	for px := max(m.Reserved/1_000_000, 1); n > maxMapBlocks && px <= m.Reserved; px *= 2 {
		n = 0
		for i := range m.Segments {
			merged := mergeNarrow(m.Segments[i].Blocks, px)
			m.Merged += len(m.Segments[i].Blocks) - len(merged)
			m.Segments[i].Blocks = merged
			n += len(merged)
		}
	}
	if len(m.Segments) > maxMapBlocks {
		m.Segments, m.OmittedSegments = largestSegments(m.Segments, maxMapBlocks)
	}
	return m
}

// largestSegments keeps the n largest segments, in address order, when there
// are too many to draw even one block each (they still count in Reserved).
func largestSegments(segs []AllocSegment, n int) ([]AllocSegment, int) {
	bySize := append([]AllocSegment(nil), segs...)
	sort.SliceStable(bySize, func(i, j int) bool { return bySize[i].Size > bySize[j].Size })
	kept := bySize[:n]
	sort.Slice(kept, func(i, j int) bool { return kept[i].Addr < kept[j].Addr })
	return kept, len(segs) - n
}

// mergeNarrow draws each run of adjacent blocks narrower than px as one.
func mergeNarrow(blocks []AllocBlock, px int64) []AllocBlock {
	out := blocks[:0]
	for i := 0; i < len(blocks); {
		j := i
		for j < len(blocks) && blocks[j].Size < px {
			j++
		}
		if j-i < 2 {
			out = append(out, blocks[i])
			i++
			continue
		}
		out = append(out, mergeRun(blocks[i:j]))
		i = j
	}
	return out
}

func mergeRun(run []AllocBlock) AllocBlock {
	m := AllocBlock{Offset: run[0].Offset, State: run[0].State, Line: run[0].Line}
	for _, b := range run {
		m.Size += b.Size
		m.Merged += max(b.Merged, 1)
		if b.State != m.State {
			m.State = "mixed"
		}
		if b.Line != m.Line {
			m.Line = 0
		}
		switch b.State {
		case "allocated", "pending_free":
			m.Allocated += b.Size
			m.Requested += b.Requested
		case "mixed":
			m.Allocated += b.Allocated
			m.Requested += b.Requested
		}
	}
	return m
}
