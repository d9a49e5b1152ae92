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

// periodicSteps returns the log indices where steps end. Iterations that
// give back what they take come first; only when none are found are
// iterations that keep part of it (a loop keeping its outputs) looked for,
// and kept when the trace then gives the kept memory back (the loop ended
// and its list was freed). A forward pass whose layers keep their
// activations is no loop: cut short by an OOM it gives nothing back; followed
// by its backward, it gives everything back, but then a tenth or more of the
// allocations have no Python frames (autograd's thread), and a trace with
// backward passes is not searched for keeping loops at all (the loops that
// keep outputs are evaluation and generation; a training loop that keeps
// something still frees most of what each step takes, for the first pass).
func periodicSteps(log *levelLog) []int {
	occ := loopOccurrences(log)
	if occ == nil {
		return nil
	}
	if ends := occ.loop(log, false); ends != nil {
		return ends
	}
	if occ.backward*10 > occ.allocs {
		return nil // a training trace: layers keeping activations for backward are no loop
	}
	if ends := occ.loop(log, true); ends != nil && releasedAfter(log, ends) {
		return ends
	}
	return nil
}

// releasedAfter says whether the level at the end of the trace is below the
// highest step end by at least half of what the steps kept.
func releasedAfter(log *levelLog, ends []int) bool {
	top := log.at(ends[0]).cur
	for _, j := range ends {
		top = max(top, log.at(j).cur)
	}
	grown := top - log.at(ends[0]).cur
	return grown > 0 && log.at(log.len()-1).cur <= top-grown/2
}

// loop is the best loop of the occurrences: the iteration count whose
// anchors sit lowest, then the largest; keep allows iterations that keep
// part of what they allocate.
func (occ *occurrences) loop(log *levelLog, keep bool) []int {
	var best []int
	var bestC int
	var bestScore float64
	tries := 0
	for _, cd := range occ.candidates() {
		if occ.keysDividing(cd.c) < minKeys {
			continue
		}
		if tries++; tries > maxTries {
			break
		}
		ends, score, ok := occ.try(log, cd.c, keep)
		if !ok {
			continue
		}
		if best == nil || score < bestScore-heightSlack || (score <= bestScore+heightSlack && cd.c > bestC) {
			best, bestC, bestScore = ends, cd.c, score
		}
	}
	return best
}

// occurrences are the allocations a loop is looked for in (seq: log
// indices), grouped by key (a stack, or a stack and a size).
type occurrences struct {
	allocs   int // allocations in the log
	backward int // of them, without Python frames (autograd's thread: backward)
	seq      []int32
	pos      map[uint64][]int32 // key -> positions in seq
	keys     []uint64           // in order of first occurrence
	byCount  map[int]int        // occurrences of a key -> allocations of keys with that count
}

// loopOccurrences groups the allocations of the log by stack; nil when there
// are too few for a loop. Allocations with frames are used when there are
// enough of them; without frames, the block size tells allocations apart.
func loopOccurrences(log *levelLog) *occurrences {
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
	if len(seq) < 2*minPerCycle {
		return nil
	}
	occ := &occurrences{allocs: len(allocs), backward: len(allocs) - len(framed), seq: seq, pos: map[uint64][]int32{}, byCount: map[int]int{}}
	for i, li := range seq {
		k := key(li)
		if _, ok := occ.pos[k]; !ok {
			occ.keys = append(occ.keys, k)
		}
		occ.pos[k] = append(occ.pos[k], int32(i))
	}
	for _, k := range occ.keys {
		occ.byCount[len(occ.pos[k])] += len(occ.pos[k])
	}
	return occ
}

// cand is an iteration count and the share of allocations it explains.
type cand struct {
	c     int
	share float64
}

// candidates are the iteration counts to try: C divides the counts of the
// stacks that make most allocations, so the divisors of the maxCounts
// heaviest counts that explain at least minExplained of the allocations,
// those that explain most first (then the larger).
func (occ *occurrences) candidates() []cand {
	n := len(occ.seq)
	counts := make([]int, 0, len(occ.byCount))
	for c := range occ.byCount {
		counts = append(counts, c)
	}
	sort.Slice(counts, func(i, j int) bool {
		if occ.byCount[counts[i]] != occ.byCount[counts[j]] {
			return occ.byCount[counts[i]] > occ.byCount[counts[j]]
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
			if share := occ.explainedShare(d); share >= minExplained {
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
	return cands
}

// explainedShare is the share of allocations a loop of d iterations accounts for.
func (occ *occurrences) explainedShare(d int) float64 {
	var covered int
	for c2, allocs := range occ.byCount {
		covered += allocs / c2 * explained(c2, d)
	}
	return float64(covered) / float64(len(occ.seq))
}

// keysDividing counts the stacks that occur a multiple of c times.
func (occ *occurrences) keysDividing(c int) int {
	n := 0
	for _, k := range occ.keys {
		if len(occ.pos[k])%c == 0 {
			n++
		}
	}
	return n
}

// try anchors a loop of c iterations and finds its boundaries; ok is false
// when no stack anchors it or a quarter of its windows have no boundary.
// score is the anchors' height (lower is better).
func (occ *occurrences) try(log *levelLog, c int, keep bool) (ends []int, score float64, ok bool) {
	anchor := bestAnchor(log, occ.seq, occ.keys, occ.pos, c)
	if anchor == nil {
		return nil, 0, false
	}
	score = anchorHeight(log, anchor)
	ends = boundaries(log, anchor, occ.seq, len(occ.seq)/(2*c), keep)
	if len(ends) < 2 || 4*len(ends) < 3*(len(anchor)-1) {
		return nil, 0, false
	}
	return ends, score, true
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
// holds no iteration's end. With keep, a window may end higher than it
// began (keptPerWindow).
func boundaries(log *levelLog, anchors []int, seq []int32, half int, keep bool) []int {
	var ends []int
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
		if hi-lo < 2 || count(lo, hi) < half {
			continue
		}
		if j, ok := windowEnd(log, lo, hi, kept[w]); ok {
			ends = append(ends, j)
		}
	}
	return ends
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
		if hi-lo < 2 || lo < 1 {
			continue
		}
		kept[w] = max(0, log.at(hi-1).cur-log.at(lo-1).cur)
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
