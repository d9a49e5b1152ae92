package analyze

import "sort"

// The body of a loop of c iterations, and how evenly a count's windows hold
// it: the checks that tell the loop's real count from one that splits its
// iterations in two (a forward whose level falls back half-way) or one that
// straddles them.

// loopBody is the allocations of the stacks that run a multiple of c times
// (log indices, in order), and each such stack's positions among them.
// One-time allocations between iterations (a CUDA graph captured when a new
// batch size comes, a cache entry made for a new shape, cuBLAS's workspace
// at the first matmul) are left out, so they do not make the iterations
// look uneven.
type loopBody struct {
	seq  []int32
	keys []uint64
	pos  map[uint64][]int32
}

func (occ *occurrences) body(c int) loopBody {
	b := loopBody{pos: map[uint64][]int32{}}
	in := map[uint64]bool{}
	for _, k := range occ.keys {
		if len(occ.pos[k])%c == 0 {
			in[k] = true
			b.keys = append(b.keys, k)
		}
	}
	for i, li := range occ.seq {
		if k := occ.keyAt[i]; in[k] {
			b.pos[k] = append(b.pos[k], int32(len(b.seq)))
			b.seq = append(b.seq, li)
		}
	}
	return b
}

// oneTime says whether log entry i is an allocation with Python frames that
// is not the loop body's.
func (b loopBody) oneTime(log *levelLog) func(int) bool {
	return func(i int) bool {
		if log.at(i).stack <= 1 {
			return false
		}
		k := sort.Search(len(b.seq), func(x int) bool { return int(b.seq[x]) >= i })
		return k == len(b.seq) || int(b.seq[k]) != i
	}
}

// evenness is the share of all allocations made by stacks that run the same
// number of times (n/c) in every window between two anchors. A loop's
// iterations run the same code, so at its real count every stack of the
// body is even. A count twice too large leaves out the stacks that run once
// per real iteration (they fall in every other window, and their count is
// no multiple of it); a count that straddles iterations puts one or two of
// them in each window.
func (occ *occurrences) evenness(b loopBody, anchor []int) float64 {
	if len(anchor) < 3 {
		return 0 // one window: nothing to compare it with
	}
	c := len(anchor)
	var even int
	for _, k := range b.keys {
		ps := b.pos[k]
		if stackEven(b.seq, ps, anchor, len(ps)/c) {
			even += len(ps)
		}
	}
	return float64(even) / float64(len(occ.seq))
}

// stackEven says whether the positions ps (in seq) fall m to each window
// [anchor[i], anchor[i+1]).
func stackEven(seq []int32, ps []int32, anchor []int, m int) bool {
	j := 0
	for _, p := range ps {
		if int(seq[p]) >= anchor[0] {
			break
		}
		j++
	}
	for w := 0; w+1 < len(anchor); w++ {
		n := 0
		for ; j < len(ps) && int(seq[ps[j]]) < anchor[w+1]; j++ {
			n++
		}
		if n != m {
			return false
		}
	}
	return true
}

// coarser is, of the tried counts that divide best's, the largest one with
// minKeys stacks or more that run a multiple of its count times but not of
// best's, evenly spaced (regular): such stacks run once in every few of
// best's iterations, so best splits the real iteration. An evaluation loop
// over a deep model is the case: its layers' stacks run layers x batches
// times and hold nearly every allocation, while the batch's own (its inputs,
// the embedding, the logits it keeps) run once a batch; the layers' windows
// hold the body almost as evenly (evenSlack) and, as the loop keeps its
// logits, sit lower. Stacks that run a few times at irregular places (caches
// filled for new shapes, CUDA graphs captured for new batch sizes) do not
// count. Returns best when none is.
func (occ *occurrences) coarser(tried []tryResult, best *tryResult) *tryResult {
	if best == nil {
		return nil
	}
	out := best
	for i := range tried {
		r := &tried[i]
		if r.c >= best.c || best.c%r.c != 0 || (out != best && r.c <= out.c) {
			continue // not a divisor, or not larger than one already found
		}
		if occ.regularBetween(r.c, best.c) >= minKeys {
			out = r
		}
	}
	return out
}

// regularBetween counts the stacks that run a multiple of c times but not of
// finer's, once every len(seq)/c allocations.
func (occ *occurrences) regularBetween(c, finer int) int {
	period := float64(len(occ.seq)) / float64(c)
	n := 0
	for _, k := range occ.keys {
		ps := occ.pos[k]
		if len(ps)%c == 0 && len(ps)%finer != 0 && regular(ps, len(ps)/c, period) {
			n++
		}
	}
	return n
}
