package analyze

import (
	"fmt"
	"math"
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// Loop accumulation: a loop that keeps every iteration's output on the
// device until it ends (evaluation collecting logits, generation collecting
// hidden states) and then frees it all. Nothing is left at the end, so it is
// no leak, but at the peak one line holds blocks from many iterations.
//
// The thresholds: at least accumMinIters iterations (a window of 2-3 live
// iterations is ordinary prefetching or double buffering), at least half of
// the iterations run by the peak (a line whose blocks come from a few scattered
// iterations is a cache or a rotation, not a loop that keeps everything), at
// least accumMinShare of the peak (below that it is not why the peak is
// where it is), and more than half of the line's bytes freed before the end
// (what is still live at the end is the leak rule's).
const (
	accumMinIters = 4
	accumMinShare = 0.10
)

// accumSite is one line's blocks live at the peak, by the iteration that
// allocated them.
type accumSite struct {
	file, fn string
	line     int
	iters    map[int]int64   // iteration -> bytes live at the peak
	origins  map[int32]int64 // recorded stack -> bytes live at the peak
	bytes    int64
	freed    int64 // of bytes, freed before the snapshot ended
	blocks   int64
	first    int64 // allocation time of the earliest block
}

// accumSites groups the blocks live at the peak that have a source line by
// that line, leaving out optimizer state and parameters (made once, by
// design) and blocks from before the trace.
func (dg *devDiag) accumSites() []*accumSite {
	m := map[fileLine]*accumSite{}
	for _, b := range dg.peak {
		if b.t == math.MinInt64 || b.cat == CatOptimizerState || b.cat == CatParameter {
			continue
		}
		file, line, fn := dg.place(b.resolved())
		if file == "" {
			continue
		}
		s := m[fileLine{file, line}]
		if s == nil {
			s = &accumSite{file: file, line: line, fn: fn, iters: map[int]int64{}, origins: map[int32]int64{}, first: b.t}
			m[fileLine{file, line}] = s
		}
		s.iters[stepOf(dg.d.Steps, b.t)] += b.size
		s.origins[b.resolved()] += b.size
		s.bytes += b.size
		s.blocks++
		s.first = min(s.first, b.t)
		if b.ft != 0 {
			s.freed += b.size
		}
	}
	out := make([]*accumSite, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].bytes != out[j].bytes {
			return out[i].bytes > out[j].bytes
		}
		return fmt.Sprint(out[i].file, out[i].line) < fmt.Sprint(out[j].file, out[j].line)
	})
	return out
}

// perIteration is what one iteration adds: the median of the iterations'
// bytes (the iteration under way at the peak also holds its temporaries).
func (s *accumSite) perIteration() int64 {
	bs := make([]int64, 0, len(s.iters))
	for _, b := range s.iters {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i] < bs[j] })
	return bs[(len(bs)-1)/2]
}

// loopAccumulation reports the line holding the most bytes at the peak among
// those that pass the thresholds above and are no leak (leakSites: blocks
// that outlive every step are the leak finding's).
func (dg *devDiag) loopAccumulation(leakSites map[string]bool) *Finding {
	steps := dg.d.Steps
	peak := dg.d.Peak.Bytes
	if len(steps) < accumMinIters || peak <= 0 {
		return nil
	}
	ran := min(len(steps), stepOf(steps, dg.d.Peak.TimeUS)+1) // iterations begun by the peak
	for _, s := range dg.accumSites() {
		if !leakSites[s.key()] && s.piles(ran, peak) {
			return dg.accumFinding(s, ran)
		}
	}
	return nil
}

// piles says whether a line's blocks at the peak are a loop's accumulation:
// from accumMinIters iterations and half of those run, accumMinShare of the
// peak, mostly freed before the end.
func (s *accumSite) piles(ran int, peak int64) bool {
	iters := len(s.iters)
	return iters >= accumMinIters && 2*iters >= ran && float64(s.bytes) >= accumMinShare*float64(peak) && 2*s.freed > s.bytes
}

// key names the site as survivor.key does, so leak sites can be left out.
func (s *accumSite) key() string { return fmt.Sprintf("%s:%d:%s", s.file, s.line, s.fn) }

func (dg *devDiag) accumFinding(s *accumSite, ran int) *Finding {
	peak := dg.d.Peak.Bytes
	iters := int64(len(s.iters))
	perIter := s.perIteration()
	file, line, alloc, where := s.file, s.line, "", "allocated at "+dg.short(s.file, s.line)
	lines := []EvidenceLine{{File: s.file, Line: s.line, Bytes: s.bytes,
		Note: fmt.Sprintf("%s: blocks from %d iterations alive at the peak, %s per iteration", s.fn, iters, fb(perIter))}}
	if lf, ok := dg.loopFrame(s); ok && (lf.File != s.file || lf.Line != s.line) {
		file, line = lf.File, lf.Line
		alloc = fmt.Sprintf(" (allocated in %s at %s)", s.fn, dg.short(s.file, s.line))
		where = fmt.Sprintf("%s, allocated in %s at %s", dg.short(file, line), s.fn, dg.short(s.file, s.line))
		lines = append([]EvidenceLine{{File: lf.File, Line: lf.Line, Bytes: s.bytes,
			Note: fmt.Sprintf("%s: the loop's line whose results are kept, %s per iteration", lf.Func, fb(perIter))}}, lines...)
	}
	f := Finding{Kind: KindLoopAccumulation, Severity: "warning", File: file, Line: line,
		Evidence: Evidence{Numbers: map[string]int64{"bytes": s.bytes, "blocks": s.blocks, "iterations_alive_at_peak": iters,
			"iterations_run_by_peak": int64(ran), "bytes_per_iteration": perIter, "peak_share_pct": pct(s.bytes, peak),
			"freed_after_peak": s.freed, "steps": int64(len(dg.d.Steps))},
			Lines: lines, StartUS: s.first, EndUS: dg.d.Peak.TimeUS}}
	fill := dg.fillText(f.Evidence.Numbers, perIter, peak, int64(ran-1), "iteration")
	f.Title = fmt.Sprintf("Loop accumulation: %s keeps %s per iteration%s; blocks from %d iterations (%s, %d%% of the peak) are alive at the peak and freed only after the loop%s",
		dg.short(file, line), fb(perIter), alloc, iters, fb(s.bytes), pct(s.bytes, peak), fill)
	f.Fix = fmt.Sprintf("the loop keeps every iteration's result on the GPU (%s): keep scalars with .item(), "+
		"move outputs to the host each iteration (.cpu(), or .to('cpu', non_blocking=True)), or reduce them as you go "+
		"(a running sum or top-k instead of a list of tensors)", where)
	return &f
}

// fillText says, when the caller gave the device memory, at which step (or
// iteration) a growth of perStep bytes from a peak of peak at step at fills
// it, and records the figures in nums.
func (dg *devDiag) fillText(nums map[string]int64, perStep, peak, at int64, unit string) string {
	capBytes, src := dg.capacity()
	if src != "given" {
		return ""
	}
	nums["device_memory"] = capBytes
	if perStep <= 0 || capBytes <= peak {
		return ""
	}
	fills := at + (capBytes-peak+perStep-1)/perStep
	nums["fills_device_at_step"] = fills
	return fmt.Sprintf("; at this rate the %s device fills at %s %d", fb(capBytes), unit, fills)
}

// addrRange is one segment's addresses, [lo, hi).
type addrRange struct{ lo, hi uint64 }

// privatePools lists the segments of a device that belong to a private pool
// (CUDA graphs, torch.cuda.MemPool). Their blocks live as long as the graph
// or pool by design: no cache or leak finding counts them.
func privatePools(segs []profiler.Segment, dev int) []addrRange {
	var out []addrRange
	for _, s := range segs {
		if s.Device == dev && s.PrivatePool() {
			out = append(out, addrRange{s.Addr, s.Addr + s.TotalSize})
		}
	}
	return out
}

func inRanges(rs []addrRange, addr uint64) bool {
	for _, r := range rs {
		if addr >= r.lo && addr < r.hi {
			return true
		}
	}
	return false
}
