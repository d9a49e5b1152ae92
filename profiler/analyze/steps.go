package analyze

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// Step is one training (or inference) step of a device trace. Steps end where
// an optimizer step ends: at PyTorch's own Optimizer.step# annotation when the
// snapshot has it, otherwise where the periodic pattern of the trace puts the
// gap between two iterations (see periodicSteps).
type Step struct {
	Index            int   `json:"index"`
	StartUS          int64 `json:"start_us"`
	EndUS            int64 `json:"end_us"`
	LiveBytesAtStart int64 `json:"live_bytes_at_start"`
	LiveBytesAtEnd   int64 `json:"live_bytes_at_end"`
	PeakBytes        int64 `json:"peak_bytes"` // highest allocated during the step
}

// Step sources.
const (
	StepsFromAnnotations = "annotations" // Optimizer.step#... END markers
	StepsFromPeriodicity = "periodicity" // the repeating allocation pattern
)

// window is an annotated scope on one device, [start, end].
type window struct {
	name       string
	start, end int64
}

// stepWindows lists the Optimizer.step# scopes of one device, in time order.
// With several optimizers (a GAN), the one that steps most often sets the
// steps; ties go to the first one seen.
func stepWindows(anns []profiler.Annotation, dev int) []window {
	open := map[string]int64{}
	byName := map[string][]window{}
	var order []string
	for _, a := range anns {
		if a.Device != dev || !isStepMarker(a.Name) {
			continue
		}
		if a.Start {
			open[a.Name] = a.TimeUS
			continue
		}
		start, ok := open[a.Name]
		if !ok {
			start = a.TimeUS // its START fell before the trace
		}
		delete(open, a.Name)
		if _, seen := byName[a.Name]; !seen {
			order = append(order, a.Name)
		}
		byName[a.Name] = append(byName[a.Name], window{name: a.Name, start: start, end: a.TimeUS})
	}
	var best []window
	for _, n := range order {
		if len(byName[n]) > len(best) {
			best = byName[n]
		}
	}
	sort.Slice(best, func(i, j int) bool { return best[i].end < best[j].end })
	return best
}

// levels reads the level log of one device: allocated bytes over time.
type levels struct {
	log  *levelLog
	base int64 // bytes allocated before the trace and still counted (Device.PreTraceBytes)
	t0   int64 // the trace's first event
}

// time is when entry i happened.
func (l levels) time(i int) int64 { return l.t0 + int64(l.log.at(i).t) }

// idx is the index of the last entry at or before t; -1 if none.
func (l levels) idx(t int64) int {
	return sort.Search(l.log.len(), func(i int) bool { return l.time(i) > t }) - 1
}

// at is the allocated bytes at time t.
func (l levels) at(t int64) int64 {
	if i := l.idx(t); i >= 0 {
		return l.base + l.log.at(i).cur
	}
	return l.base
}

// peakIn is the highest level in (from, to].
func (l levels) peakIn(from, to int64) int64 {
	best := l.at(from)
	for i := l.idx(from) + 1; i < l.log.len() && l.time(i) <= to; i++ {
		best = max(best, l.base+l.log.at(i).cur)
	}
	return best
}

// stepsFrom turns step end times into steps.
func (l levels) stepsFrom(ends []int64) []Step {
	var out []Step
	start := l.t0
	for i, end := range ends {
		out = append(out, Step{Index: i, StartUS: start, EndUS: end, LiveBytesAtStart: l.at(start),
			LiveBytesAtEnd: l.at(end), PeakBytes: l.peakIn(start, end)})
		start = end
	}
	return out
}

// findSteps returns the steps of one device and where they came from.
func findSteps(lv levels, opt []window, truncated bool) ([]Step, string) {
	if len(opt) > 0 {
		var ends []int64
		for _, w := range opt {
			// Past the end of a truncated log the levels are unknown.
			if truncated && lv.log.len() > 0 && w.end > lv.time(lv.log.len()-1) {
				break
			}
			ends = append(ends, w.end)
		}
		return lv.stepsFrom(ends), StepsFromAnnotations
	}
	if idx := periodicSteps(lv.log); len(idx) >= 2 {
		ends := make([]int64, len(idx))
		for i, j := range idx {
			ends[i] = lv.time(j)
		}
		return lv.stepsFrom(ends), StepsFromPeriodicity
	}
	return []Step{}, ""
}

// Periodicity. A training or inference loop runs the same code every
// iteration, so the allocations made from Python (each keyed by its recorded
// stack) repeat: every stack that belongs to the loop body occurs a multiple
// of C times in a trace of C iterations. Every count that explains at least
// minExplained of the allocations, from at least minKeys stacks, is tried.
// A stack that occurs m*C times, taken every m-th time, anchors the
// iterations if its occurrences are evenly spaced; of those, the one after
// which memory is lowest marks the top of the loop. Between two anchors the
// level rises (forward), peaks and falls back (backward, optimizer,
// zero_grad); the step boundary is where it has settled: the earliest point
// after the window's peak from which the level stays at its pre-anchor value
// until the next iteration begins. Windows without such a fall (a loop body that only allocates) give
// no boundary; a C for which a quarter of the windows give none is not the
// loop. Of the counts left, the loop is the one whose anchors sit lowest (the
// real top of the loop is where memory is at its floor; a count twice too
// large puts every other anchor mid-iteration), and among counts whose anchors
// sit equally low the largest (a count that divides the real one, such as
// the 6 lengths a cache saw in 18 iterations, anchors every third iteration).
const (
	minExplained = 0.8 // share of allocations whose stack count is a multiple of C
	minPerCycle  = 4   // allocations per iteration, so a loop of single allocations is no step
	minKeys      = 3   // stacks that repeat C times or a multiple: a loop body, not one line in a loop
	maxTries     = 24  // counts tried, those that explain most first
	maxCounts    = 16  // stack counts whose divisors are candidates
	heightSlack  = 0.05
)

// anchorHeight is where, between the lowest and the highest level of the
// iteration before it, memory stands just before each anchor, on average:
// 0 at the floor (the top of the loop), near 1 mid-iteration.
func anchorHeight(log *levelLog, anchor []int) float64 {
	var sum float64
	var n int
	for j := 1; j < len(anchor); j++ {
		lo, hi := log.at(anchor[j-1]).cur, log.at(anchor[j-1]).cur
		for i := anchor[j-1]; i < anchor[j]; i++ {
			lo, hi = min(lo, log.at(i).cur), max(hi, log.at(i).cur)
		}
		if hi > lo {
			sum += float64(log.at(anchor[j]-1).cur-lo) / float64(hi-lo)
			n++
		}
	}
	if n == 0 {
		return 1
	}
	return sum / float64(n)
}

// explained is how many of a stack's k allocations a loop of d iterations
// accounts for: all of them when k is a multiple of d, the periodic part when
// only a few are left over (one-time allocations of the first iteration:
// cuBLAS's workspace on the first matmul, say), none otherwise.
func explained(k, d int) int {
	m := k / d
	if m == 0 || k-m*d > max(2, k/10) {
		return 0
	}
	return m * d
}

// periodicSteps returns the log indices where steps end.
func periodicSteps(log *levelLog) []int {
	var allocs, framed []int32
	for i := 0; i < log.len(); i++ {
		e := log.at(i)
		if e.stack == 0 {
			continue
		}
		allocs = append(allocs, int32(i))
		if e.stack > 1 {
			framed = append(framed, int32(i))
		}
	}
	// Without frames, the block size tells allocations apart.
	key := func(i int32) uint64 {
		size := log.at(int(i)).cur
		if i > 0 {
			size -= log.at(int(i) - 1).cur
		}
		return uint64(log.at(int(i)).stack)<<40 ^ uint64(size)
	}
	seq := allocs
	if len(framed) >= 8 && len(framed)*5 >= len(allocs) {
		seq, key = framed, func(i int32) uint64 { return uint64(log.at(int(i)).stack) }
	}
	n := len(seq)
	if n < 2*minPerCycle {
		return nil
	}
	pos := map[uint64][]int32{} // key -> positions in seq
	var keys []uint64
	for i, li := range seq {
		k := key(li)
		if _, ok := pos[k]; !ok {
			keys = append(keys, k)
		}
		pos[k] = append(pos[k], int32(i))
	}
	byCount := map[int]int{} // count -> allocations of keys with that count
	for _, k := range keys {
		byCount[len(pos[k])] += len(pos[k])
	}
	type cand struct {
		c     int
		share float64
	}
	// C divides the counts of the stacks that make most allocations: the
	// divisors of the maxCounts heaviest counts are the candidates.
	counts := make([]int, 0, len(byCount))
	for c := range byCount {
		counts = append(counts, c)
	}
	sort.Slice(counts, func(i, j int) bool {
		if byCount[counts[i]] != byCount[counts[j]] {
			return byCount[counts[i]] > byCount[counts[j]]
		}
		return counts[i] < counts[j]
	})
	var cands []cand
	seen := map[int]bool{}
	for i, c := range counts {
		if i == maxCounts {
			break
		}
		for d := 2; d <= c; d++ {
			if c%d != 0 || seen[d] || n/d < minPerCycle {
				continue
			}
			seen[d] = true
			var covered int
			for c2, allocs := range byCount {
				covered += allocs / c2 * explained(c2, d)
			}
			if share := float64(covered) / float64(n); share >= minExplained {
				cands = append(cands, cand{c: d, share: share})
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].share != cands[j].share {
			return cands[i].share > cands[j].share
		}
		return cands[i].c > cands[j].c
	})
	var best []int
	var bestC int
	var bestScore float64
	tries := 0
	for _, cd := range cands {
		keysOf := 0
		for _, k := range keys {
			if len(pos[k])%cd.c == 0 {
				keysOf++
			}
		}
		if keysOf < minKeys {
			continue
		}
		if tries++; tries > maxTries {
			break
		}
		anchor := bestAnchor(log, seq, keys, pos, cd.c)
		score := anchorHeight(log, anchor)
		if anchor == nil {
			continue
		}
		ends := boundaries(log, anchor, seq, len(seq)/(2*cd.c))
		if len(ends) < 2 || 4*len(ends) < 3*(len(anchor)-1) {
			continue
		}
		if best == nil || score < bestScore-heightSlack || (score <= bestScore+heightSlack && cd.c > bestC) {
			best, bestC, bestScore = ends, cd.c, score
		}
	}
	return best
}

// bestAnchor picks the evenly spaced stack, taken once per iteration, after
// which memory is lowest; it returns the log indices of its occurrences.
func bestAnchor(log *levelLog, seq []int32, keys []uint64, pos map[uint64][]int32, c int) []int {
	period := float64(len(seq)) / float64(c)
	var best []int
	var bestCost int64
	var bestFirst int32
	for _, k := range keys {
		ps := pos[k]
		if len(ps)%c != 0 {
			continue
		}
		m := len(ps) / c
		if !regular(ps, m, period) {
			continue
		}
		var cost int64
		for j := m; j < len(ps); j += m {
			if li := seq[ps[j]]; li > 0 {
				cost += log.at(int(li) - 1).cur
			}
		}
		if best == nil || cost < bestCost || (cost == bestCost && ps[0] < bestFirst) {
			best, bestCost, bestFirst = best[:0], cost, ps[0]
			for j := 0; j < len(ps); j += m {
				best = append(best, int(seq[ps[j]]))
			}
		}
	}
	return best
}

// regular says whether every m-th occurrence of a stack (positions ps) comes
// once per iteration: the gaps are within half of their median, which is
// within half of the mean iteration length; the first gap may be up to three
// times the median (the first iteration also creates optimizer state and
// other one-time buffers).
func regular(ps []int32, m int, period float64) bool {
	var gaps []float64
	for j := m; j < len(ps); j += m {
		gaps = append(gaps, float64(ps[j]-ps[j-m]))
	}
	if len(gaps) == 0 {
		return false
	}
	sorted := append([]float64(nil), gaps...)
	sort.Float64s(sorted)
	med := sorted[len(sorted)/2]
	if med < period/2 || med > 1.5*period {
		return false
	}
	for i, g := range gaps {
		hi := 1.5 * med
		if i == 0 {
			hi = 3 * med
		}
		if g < med/2 || g > hi {
			return false
		}
	}
	return true
}

// boundaries finds, in each window between anchors (and before the first and
// after the last), the point where the level settles after the iteration's
// peak. A window with fewer than half an iteration's allocations (of seq)
// holds no iteration's end.
func boundaries(log *levelLog, anchors []int, seq []int32, half int) []int {
	var ends []int
	edges := append(append([]int{0}, anchors...), log.len())
	count := func(lo, hi int) int {
		a := sort.Search(len(seq), func(i int) bool { return int(seq[i]) >= lo })
		b := sort.Search(len(seq), func(i int) bool { return int(seq[i]) >= hi })
		return b - a
	}
	for w := 0; w+1 < len(edges); w++ {
		lo, hi := edges[w], edges[w+1]
		if hi-lo < 2 || count(lo, hi) < half {
			continue
		}
		var start int64
		if lo > 0 {
			start = log.at(lo - 1).cur
		}
		top := lo
		for i := lo; i < hi; i++ {
			if log.at(i).cur > log.at(top).cur {
				top = i
			}
		}
		if top+1 >= hi || log.at(top).cur <= start {
			continue
		}
		low := log.at(top + 1).cur
		for i := top + 1; i < hi; i++ {
			low = min(low, log.at(i).cur)
		}
		if 2*(log.at(top).cur-low) < log.at(top).cur-start {
			continue // memory did not fall back: no end of an iteration here
		}
		settled := log.at(hi-1).cur + max(512, (log.at(top).cur-low)/1000)
		j := hi - 1
		for j > top+1 && log.at(j-1).cur <= settled {
			j--
		}
		ends = append(ends, j)
	}
	return ends
}
