package analyze

import "sort"

// Periodicity. A training or inference loop runs the same code every
// iteration, so the allocations made from Python (each keyed by its recorded
// stack) repeat: every stack that belongs to the loop body occurs a multiple
// of C times in a trace of C iterations. Every count that explains at least
// minExplained of the allocations, from at least minKeys stacks, is tried.
// The loop body for C is the stacks that occur a multiple of C times (one-time
// allocations between iterations, such as a CUDA graph captured for a new
// batch size, are left out: see loopBody). A body stack that occurs m*C
// times, taken every m-th time, anchors the iterations if its occurrences
// are evenly spaced among the body's; of those, the one after which memory
// is lowest marks the top of the loop. Between two anchors the
// level rises (forward), peaks and falls back (backward, optimizer,
// zero_grad); the step boundary is where it has settled: the earliest point
// after the window's peak from which the level stays at its pre-anchor value
// until the next iteration begins. Windows without such a fall (a loop body that only allocates) give
// no boundary; a C for which a quarter of the windows give none is not the
// loop (once it is, such a window is still an iteration: see boundaries).
// Of the counts left, those whose windows hold the body least evenly are
// dropped (a count twice too large splits each iteration in two, so the
// stacks run once an iteration fall in every other window; one that
// straddles iterations, 12 windows over 16 iterations, puts one or two of
// each in a window: see evenness); then the loop is the one whose anchors sit
// lowest (the real top of the loop is where memory is at its floor), and
// among counts whose anchors sit equally low the largest (a count that
// divides the real one, such as the 6 lengths a cache saw in 18 iterations,
// anchors every third iteration).
const (
	minExplained = 0.8 // share of allocations whose stack count is a multiple of C
	minPerCycle  = 4   // allocations per iteration, so a loop of single allocations is no step
	minKeys      = 3   // stacks that repeat C times or a multiple: a loop body, not one line in a loop
	maxTries     = 24  // counts tried, those that explain most first
	maxCounts    = 16  // stack counts whose divisors are candidates
	heightSlack  = 0.05
	// evenSlack is the share of the allocations by which a count may hold the
	// body less evenly than the best. On the recordings here the real count
	// holds as much as the best count tried (0.51 of the allocations in
	// healthy_cuda_graphs, whose captures add to some iterations; 0.76 in
	// healthy_kv_generate; 0.94-1.0 elsewhere), and the wrong counts that
	// would win on their anchors' height 0.11 or more less (accum_gen_scores'
	// 194 and 388 for 97 hold 0.88; healthy_eval_host's 32 and 64 for 16 0.82;
	// accum_eval_logits' 12 for 16 0.12); the real count's divisors hold as
	// much as it does.
	evenSlack = 0.05
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

// periodicSteps returns the log indices where steps end. A forward pass
// whose layers keep their activations is no loop: cut short by an OOM it
// gives nothing back; followed by its backward, it gives everything back,
// but then a tenth or more of the allocations have no Python frames
// (autograd's thread), and a trace with backward passes is searched only for
// iterations that give back what they take (the loops that keep outputs are
// evaluation and generation; a training loop that keeps something still
// frees most of what each step takes). Other traces are searched first for
// iterations that may keep part of what they take (a loop keeping its
// outputs), kept when the trace then gives the kept memory back (the loop
// ended and its list was freed): a generation loop keeping each token's
// scores also frees most of each step, and searched as a loop that keeps
// nothing it reads as twice the steps, half of them falling back by chance.
// Without that release, iterations that give back what they take.
func periodicSteps(log *levelLog) []int {
	occ := loopOccurrences(log)
	if occ == nil {
		return nil
	}
	if occ.training() {
		return occ.loop(log, false) // a training trace: layers keeping activations for backward are no loop
	}
	if ends := occ.loop(log, true); ends != nil && releasedAfter(log, ends) {
		return ends
	}
	return occ.loop(log, false)
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

// loop is the best loop of the occurrences (see bestTry); keep allows
// iterations that keep part of what they allocate.
func (occ *occurrences) loop(log *levelLog, keep bool) []int {
	var tried []tryResult
	tries := 0
	for _, cd := range occ.candidates() {
		if occ.keysDividing(cd.c) < minKeys {
			continue
		}
		if tries++; tries > maxTries {
			break
		}
		if r, ok := occ.try(log, cd.c, keep); ok {
			tried = append(tried, r)
		}
	}
	if best := occ.coarser(tried, bestTry(tried)); best != nil {
		return best.ends
	}
	return nil
}

// bestTry is, of the iteration counts whose windows hold the loop body most
// evenly, the one whose anchors sit lowest, then the largest.
func bestTry(tried []tryResult) *tryResult {
	var top float64
	for _, r := range tried {
		top = max(top, r.even)
	}
	var best *tryResult
	for i, r := range tried {
		if r.even < top-evenSlack {
			continue // splits or straddles the iterations of a count that holds the body evenly
		}
		if best == nil || r.height < best.height-heightSlack || (r.height <= best.height+heightSlack && r.c > best.c) {
			best = &tried[i]
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
	keyAt    []uint64           // position in seq -> key
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
	occ.keyAt = make([]uint64, len(seq))
	for i, li := range seq {
		k := key(li)
		occ.keyAt[i] = k
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

// training says whether the trace has backward passes: a tenth or more of
// its allocations have no Python frames (autograd's thread).
func (occ *occurrences) training() bool { return occ.backward*10 > occ.allocs }

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

// tryResult is one iteration count tried: its step ends, its anchors'
// height (lower is better) and how evenly its windows hold the loop body.
type tryResult struct {
	c      int
	ends   []int
	height float64
	even   float64
}

// try anchors a loop of c iterations and finds its boundaries; ok is false
// when no stack anchors it or a quarter of its windows have no boundary.
func (occ *occurrences) try(log *levelLog, c int, keep bool) (tryResult, bool) {
	body := occ.body(c)
	anchor := bestAnchor(log, body.seq, body.keys, body.pos, c)
	if anchor == nil {
		return tryResult{}, false
	}
	r := tryResult{c: c, height: anchorHeight(log, anchor), even: occ.evenness(body, anchor)}
	var settled int
	oneTime := body.oneTime(log)
	if occ.training() {
		// After a backward pass, the one-time allocations that end a window are
		// the first optimizer step's state and its first call's buffers: they
		// belong to the iteration before.
		oneTime = func(int) bool { return false }
	}
	r.ends, settled = boundaries(log, anchor, occ.seq, len(occ.seq)/(2*c), keep, oneTime)
	if settled < 2 || 4*settled < 3*(len(anchor)-1) {
		return tryResult{}, false
	}
	return r, true
}
