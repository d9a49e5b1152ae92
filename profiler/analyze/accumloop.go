package analyze

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// The line a loop accumulation names. The kept blocks are allocated wherever
// the loop's call ends up (a model's forward, a library's lm_head), but what
// the user changes is the loop: the line in its body whose result is kept.
// The loop's function is the deepest function that every allocation of one
// iteration runs under (the body allocates on other lines too: its inputs,
// its loss, the optimizer's step), and the loop's line is the kept blocks'
// frame in that function. When that frame is not in the user's code (the
// loop runs inside a library, or the iteration allocates only inside the one
// call), the finding keeps the allocating line.

// loopFrame is the frame of the site's stack in the function that runs its
// loop; ok is false when it cannot be told or is not the user's.
func (dg *devDiag) loopFrame(s *accumSite) (profiler.Frame, bool) {
	o, ok := s.mainOrigin()
	if !ok || dg.t == nil {
		return profiler.Frame{}, false
	}
	kept := dg.frameList(profiler.StackID(o))
	depth := len(kept) // outer frames shared with every other allocation of the iteration
	others := 0
	for st := range dg.iterationStacks(s.middleIteration()) {
		if st == profiler.StackID(o) {
			continue
		}
		if k := sharedOuter(kept, dg.frameList(st)); k > 0 {
			depth, others = min(depth, k), others+1
		}
	}
	if others == 0 || depth == 0 {
		return profiler.Frame{}, false
	}
	f := kept[len(kept)-depth]
	return f, profiler.IsUserFile(f.File)
}

// frameList is a stack's frames, innermost first.
func (dg *devDiag) frameList(st profiler.StackID) []profiler.Frame {
	ids := dg.a.frames.StackAt(st)
	out := make([]profiler.Frame, len(ids))
	for i, id := range ids {
		out[i] = dg.a.frames.FrameAt(id)
	}
	return out
}

// sharedOuter is how many outer frames two stacks (innermost first) share: a
// frame counts when both run the same function; the first one whose lines
// differ is the last counted (the two allocations part there).
func sharedOuter(a, b []profiler.Frame) int {
	k := 0
	for k < len(a) && k < len(b) {
		fa, fb := a[len(a)-1-k], b[len(b)-1-k]
		if fa.File != fb.File || fa.Func != fb.Func {
			return k
		}
		k++
		if fa.Line != fb.Line {
			return k
		}
	}
	return k
}

// iterationStacks are the stacks of the allocations with frames made during
// step i.
func (dg *devDiag) iterationStacks(i int) map[profiler.StackID]bool {
	out := map[profiler.StackID]bool{}
	steps := dg.d.Steps
	if i < 0 || i >= len(steps) {
		return out
	}
	lv := levels{log: &dg.t.log, t0: dg.t.firstT}
	for j := lv.idx(steps[i].StartUS) + 1; j < lv.log.len() && lv.time(j) <= steps[i].EndUS; j++ {
		if e := lv.log.at(j); e.stack > 1 {
			out[profiler.StackID(e.stack-1)] = true
		}
	}
	return out
}

// mainOrigin is the recorded stack that holds most of the site's bytes.
func (s *accumSite) mainOrigin() (int32, bool) {
	best, ok := int32(0), false
	for o, n := range s.origins {
		if o >= 0 && (!ok || n > s.origins[best] || (n == s.origins[best] && o < best)) {
			best, ok = o, true
		}
	}
	return best, ok
}

// middleIteration is the median of the iterations the site's blocks come from.
func (s *accumSite) middleIteration() int {
	its := make([]int, 0, len(s.iters))
	for i := range s.iters {
		its = append(its, i)
	}
	sort.Ints(its)
	return its[len(its)/2]
}
