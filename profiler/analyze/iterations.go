package analyze

import "sort"

// Where the iterations of a loop found by periodicSteps begin (anchors) and
// end (the boundary in each window between anchors).

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
// holds no iteration's end. With keep, a window may end higher than it
// began (keptPerWindow). settled counts the windows whose level fell back;
// a window between two anchors whose level did not (its iteration kept
// something made once: the first iteration's workspaces, a CUDA graph
// captured for a new batch size) is still one iteration, ending where the
// next begins, once the loop is established (see try). An iteration ends
// before the one-time allocations that open the next (iterationEnd).
func boundaries(log *levelLog, anchors []int, seq []int32, half int, keep bool, oneTime func(int) bool) (ends []int, settled int) {
	edges := append(append([]int{0}, anchors...), log.len())
	count := func(lo, hi int) int {
		a := sort.Search(len(seq), func(i int) bool { return int(seq[i]) >= lo })
		b := sort.Search(len(seq), func(i int) bool { return int(seq[i]) >= hi })
		return b - a
	}
	kept := make([]int64, len(edges)-1)
	if keep {
		kept = keptPerWindow(log, edges)
	}
	for w := 0; w+1 < len(edges); w++ {
		lo, hi := edges[w], edges[w+1]
		last := w+2 == len(edges) // holds the rest of the last anchored iteration, however little
		if hi-lo < 2 || (!last && count(lo, hi) < half) {
			continue
		}
		j, ok := iterationEnd(log, lo, hi, kept[w], oneTime)
		if ok {
			settled++
		}
		if ok || (w >= 1 && w+2 < len(edges)) {
			ends = append(ends, j)
		}
	}
	return ends, settled
}

// iterationEnd is where the iteration in window lo..hi-1 ends, and whether
// its level settled there (windowEnd); when it did not, the window's last
// entry of its own. Either way the iteration stops before the one-time
// allocations that open the next one, and when those raised the level it
// seemed to settle to (a workspace made for the next request's new shape),
// it settles to its own.
func iterationEnd(log *levelLog, lo, hi int, kept int64, oneTime func(int) bool) (int, bool) {
	end := beforeOneTime(log, lo, hi-1, oneTime)
	j, ok := windowEnd(log, lo, hi, kept)
	switch {
	case !ok || j > end:
		return end, ok
	case end < hi-1:
		if j2, ok2 := windowEnd(log, lo, end+1, kept); ok2 {
			return j2, true
		}
	}
	return j, true
}

// beforeOneTime moves a window's last entry j (in the window from lo) back
// before the one-time allocations that open the next iteration ahead of any
// of the loop body's (a cache entry made for a new shape, a CUDA graph
// captured for a new batch size): they belong to the iteration that needs
// them, and the level at the end is then what the loop itself holds between
// iterations. A run of one-time allocations and frees from j back to the
// loop body's last allocation is passed over.
func beforeOneTime(log *levelLog, lo, j int, oneTime func(int) bool) int {
	q := -1
	for i := j; i > lo; i-- {
		if log.at(i).stack == 0 {
			continue // a free
		}
		if !oneTime(i) {
			break
		}
		q = i
	}
	if q > lo+1 {
		return q - 1
	}
	return j
}

// keptPerWindow is what each window may keep and still count as an
// iteration: a loop that keeps each iteration's output (a list of logits)
// ends every iteration higher than it began, by about the same bytes, and
// most of what it allocates (the forward's temporaries) it frees. A window is
// allowed what it kept when that is within a factor of two of the median of
// the anchored windows and at most keptShare of the bytes it allocated; the
// window before the first anchor (the loop's set-up), one that kept far more
// (the first step creating optimizer state) and a loop that keeps nearly all
// it allocates (building a model layer by layer) are allowed nothing.
func keptPerWindow(log *levelLog, edges []int) []int64 {
	kept := make([]int64, len(edges)-1)
	var ks []int64
	for w := 1; w+1 < len(edges); w++ {
		lo, hi := edges[w], edges[w+1]
		if hi-lo < 2 {
			continue
		}
		var start int64
		if lo > 0 {
			start = log.at(lo - 1).cur
		}
		kept[w] = max(0, log.at(hi-1).cur-start)
		ks = append(ks, kept[w])
		if float64(kept[w]) > keptShare*float64(allocatedIn(log, lo, hi)) {
			kept[w] = 0
		}
	}
	if len(ks) == 0 {
		return kept
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	med := ks[len(ks)/2]
	for w := range kept {
		if w == 0 || med == 0 || kept[w] > 2*med || 2*kept[w] < med {
			kept[w] = 0
		}
	}
	return kept
}

// keptShare: a model's layers built in a loop keep 85-93% of what each
// iteration allocates (the GPT-2 of examples/oom/too_big.py); an evaluation
// keeping GPT-2's logits about 40%, a generation keeping each token's scores
// a few percent.
const keptShare = 2.0 / 3

// allocatedIn adds up the bytes allocated by the log entries lo..hi-1.
func allocatedIn(log *levelLog, lo, hi int) int64 {
	var n int64
	for i := max(lo, 1); i < hi; i++ {
		if log.at(i).stack != 0 {
			n += max(0, log.at(i).cur-log.at(i-1).cur)
		}
	}
	return n
}

// windowEnd is where one iteration (log entries lo..hi-1) ends: the earliest
// point after its peak from which the level stays where the window ends. An
// iteration must give back, after its peak, at least half of what it took
// beyond what it may keep (keptPerWindow); a window that rises and stays up
// is no iteration.
func windowEnd(log *levelLog, lo, hi int, kept int64) (int, bool) {
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
		return 0, false
	}
	low := log.at(top + 1).cur
	for i := top + 1; i < hi; i++ {
		low = min(low, log.at(i).cur)
	}
	fall, rise := log.at(top).cur-low, log.at(top).cur-start
	if fall <= 0 || 2*fall < rise-kept {
		return 0, false // memory did not fall back: no end of an iteration here
	}
	settled := log.at(hi-1).cur + max(512, fall/1000)
	j := hi - 1
	for j > top+1 && log.at(j-1).cur <= settled {
		j--
	}
	return j, true
}
