package analyze

import "math"

// fit_predict.go replays a kept trace at another size, and as a plan would
// run it: a smaller micro-batch with gradients kept between micro-steps,
// checkpointed blocks, 8-bit optimizer state, expandable segments.

// FitVariant is a way to run the step.
type FitVariant struct {
	// MicroBatch is the batch of one forward/backward (0: the whole batch);
	// Accumulation the micro-steps per optimizer step. With more than one,
	// gradients stay alive through every micro-step's forward and backward.
	MicroBatch   int64 `json:"micro_batch,omitempty"`
	Accumulation int64 `json:"accumulation,omitempty"`
	// Checkpoint lists the Modules whose activations are recomputed in backward (by index).
	Checkpoint []int `json:"checkpoint,omitempty"`
	// Optimizer8bit keeps optimizer state in 8 bits (a quarter of AdamW's fp32).
	Optimizer8bit bool `json:"optimizer_8bit,omitempty"`
	// Expandable runs with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
	Expandable bool `json:"expandable_segments,omitempty"`
}

// FitPrediction is the replay's answer.
type FitPrediction struct {
	Size      FitSize `json:"size"`
	Allocated int64   `json:"peak_allocated"` // as torch.cuda.max_memory_allocated counts
	Reserved  int64   `json:"peak_reserved"`  // as torch.cuda.max_memory_reserved
	// Margin is reserved minus allocated at their peaks: the allocator's
	// rounding and the free pieces of its segments (fragmentation).
	Margin int64 `json:"fragmentation_margin"`
	// Transient is the largest allocation that grows with size, at this size.
	Transient int64  `json:"largest_transient"`
	Phase     string `json:"peak_phase"` // forward, backward, optimizer step, or the failed request
	// OutOfMemory: under the limit the replay was given, the allocator model refused a request.
	OutOfMemory bool `json:"out_of_memory,omitempty"`
}

// fitReplay is one replay's state.
type fitReplay struct {
	m          *FitModel
	v          FitVariant
	sim        *simAllocator
	k          float64  // tokens of a micro-step over the recorded tokens
	savedScale float64  // what checkpointing leaves of saved activations
	recompute  int64    // with no trace: the most a checkpointed block's recomputation adds in backward
	ckpt       *fitCkpt // checkpointing replayed on a trace (fit_checkpoint.go)
	blocks     []*simBlock
	skip       []bool
	out        FitPrediction
	bwd        bool
	statePre   bool // optimizer state is allocated first, not where the trace made it
}

// Predict replays the trace for size s run as v; limit (0: none) is the
// memory the allocator may reserve, as a cap or the device's memory.
func (m *FitModel) Predict(s FitSize, v FitVariant, limit int64) FitPrediction {
	micro := s
	if v.MicroBatch > 0 {
		micro.Batch = v.MicroBatch
	}
	r := &fitReplay{m: m, v: v, k: micro.tokens() / m.Recorded.tokens(), savedScale: 1,
		sim: &simAllocator{expandable: v.Expandable, limit: limit}}
	r.out.Size = s
	r.checkpointing()
	r.run()
	r.out.OutOfMemory = r.sim.oom
	r.out.Transient = r.scaled(m.LargestTransient, false)
	r.out.Margin = r.out.Reserved - r.out.Allocated
	return r.out
}

// checkpointing replays the checkpointed blocks on a trace block by block
// (fit_checkpoint.go). A snapshot with no trace has one moment: its saved
// activations shrink alike by what the blocks give back, and backward's
// recomputation of a checkpointed block is added where it passes what
// backward has freed by then.
func (r *fitReplay) checkpointing() {
	if len(r.v.Checkpoint) == 0 {
		return
	}
	if !r.m.trace.stateOnly {
		r.ckpt = newFitCkpt(r.m.trace, r.m.Modules, r.v.Checkpoint)
		return
	}
	freed, extra := stateCheckpoint(r.m.Modules, r.v.Checkpoint)
	if saved := r.m.savedAtPeak(); saved > 0 {
		r.savedScale = max(0, 1-float64(freed)/float64(saved))
	}
	if extra > 0 {
		r.recompute = r.scaled(extra, false)
	}
}

// stateCheckpoint is, for checkpointing the modules ckpt (indexes into
// mods, in forward order), the saved bytes they give back and the most a
// recomputation adds over backward's start. Backward runs the modules in
// reverse: when checkpointed module j is recomputed, the saved activations of
// every module after it are gone (only the input a checkpointed one kept was
// there), so j adds its saved bytes less those. Checkpointing the first blocks
// adds nothing; the last block, all of its saved bytes. On the H200, adding the
// largest block at every moment over-predicted gpt2's plan with h.0–h.4 by
// 6.1% (docs/fit.md).
func stateCheckpoint(mods []FitModule, ckpt []int) (freed, extra int64) {
	in := make(map[int]bool, len(ckpt))
	for _, i := range ckpt {
		if i >= 0 && i < len(mods) {
			in[i] = true
		}
	}
	var gone int64 // freed by backward before module j, over backward's start
	for j := len(mods) - 1; j >= 0; j-- {
		b := mods[j]
		if !in[j] {
			gone += b.Saved
			continue
		}
		freed += b.Saved - b.Kept
		extra = max(extra, b.Saved-gone)
		gone += b.Kept
	}
	return freed, extra
}

// scaled is a size at this replay's tokens, a multiple of 512.
func (r *fitReplay) scaled(size int64, saved bool) int64 {
	f := r.k
	if saved {
		f *= r.savedScale
	}
	return blockSize(uint64(math.Ceil(float64(size) * f)))
}

// run replays every event up to the end or the failed request.
func (r *fitReplay) run() {
	ft := r.m.trace
	r.blocks = make([]*simBlock, len(ft.allocs))
	r.skip = make([]bool, len(ft.allocs))
	r.sim.allocated, r.sim.reserved = ft.base, ft.base
	if free := ft.reservedBase - ft.base; free > 0 {
		r.sim.seedFree(free) // the free room in segments made before the trace
	}
	r.prealloc()
	if !r.pass(nil) {
		return
	}
	if ft.steps() < 2 && ft.oomAt < 0 {
		// One step, which made the optimizer state after its backward: the
		// next step runs beside that state, in the segments the first one
		// left. Replay it again, without what stayed alive (weights, state).
		r.pass(ft.persistent())
	}
}

// pass replays the events once, leaving out the allocations in skip; false
// when it stopped at the failed request.
func (r *fitReplay) pass(skip []bool) bool {
	ft := r.m.trace
	for n, e := range ft.ev {
		if n == ft.oomAt {
			r.failedRequest()
			return false
		}
		i, a := fitEvent(e, ft)
		if skip != nil && skip[i] {
			continue
		}
		if e < 0 {
			if r.blocks[i] == nil {
				r.ckptRecompute(i)
			}
			if !r.skip[i] && r.blocks[i] != nil {
				r.sim.free(r.blocks[i])
				r.blocks[i] = nil
			}
			continue
		}
		r.allocate(i, a)
	}
	if ft.oomAt == len(ft.ev) {
		r.failedRequest()
		return false
	}
	return true
}

// persistent marks the allocations the trace never frees.
func (ft *fitTrace) persistent() []bool {
	out := make([]bool, len(ft.allocs))
	for i := range out {
		out[i] = true
	}
	for _, e := range ft.ev {
		if e < 0 {
			out[-e-1] = false
		}
	}
	return out
}

// prealloc puts in place what a steady-state step finds alive: optimizer
// state, when the trace failed before an optimizer step made it (a trace
// with a later step replays it where it was made, a trace of one step twice:
// the allocator then places it as it did, 0-3% from the reserved peaks
// measured on the H200, against 8-13% with it placed first), and under
// accumulation the gradients of the micro-steps before.
func (r *fitReplay) prealloc() {
	r.statePre = r.m.trace.oomAt >= 0 && r.m.trace.steps() < 2
	state := r.m.stateBytes()
	if r.v.Optimizer8bit {
		state /= 4
	}
	if state > 0 && r.statePre {
		r.sim.alloc(blockSize(uint64(state)))
	}
	if g := r.m.gradBytes(); r.v.Accumulation > 1 && g > 0 {
		r.sim.alloc(blockSize(uint64(g)))
	}
	r.note("forward")
}

// allocate replays allocation i.
func (r *fitReplay) allocate(i int, a *fitAlloc) {
	if a.cls == fitState && r.statePre {
		r.skip[i] = true // in place from the start (prealloc)
		return
	}
	r.bwd = a.bwd
	if a.bwd {
		r.ckptEndForward()
	}
	size := r.sizeOf(a)
	if r.ckptAllocate(i, size, r.phase(a)) {
		return
	}
	b := r.sim.alloc(size)
	if a.cls == fitGrad && r.v.Accumulation > 1 {
		// Accumulated into the gradient already there, then freed.
		r.note(r.phase(a))
		if b != nil {
			r.sim.free(b)
		}
		r.skip[i] = true
		return
	}
	r.blocks[i] = b
	r.note(r.phase(a))
}

// sizeOf is allocation a's bytes in this replay.
func (r *fitReplay) sizeOf(a *fitAlloc) int64 {
	switch {
	case a.cls == fitState && r.v.Optimizer8bit:
		return blockSize(uint64(a.size / 4))
	case a.cls == fitTokens:
		fixed := int64(float64(a.size) * float64(a.fixedShare))
		return blockSize(uint64(fixed + r.scaled(a.size-fixed, a.inBlocks)))
	}
	return a.size
}

// failedRequest replays the request that ran out of memory.
func (r *fitReplay) failedRequest() {
	ft := r.m.trace
	size := ft.oomSize
	if ft.oomCls == fitTokens {
		size = r.scaled(size, false)
	}
	if b := r.sim.alloc(size); b != nil {
		r.note("the request that ran out of memory")
		r.sim.free(b)
	}
	r.unrecorded()
}

// unrecorded adds the estimated rest of the failed step (fit_rest.go).
func (r *fitReplay) unrecorded() {
	m, rest := r.m, r.m.Unrecorded
	if rest.Forward > 0 {
		r.sim.alloc(r.scaled(rest.Forward, true))
		r.note("forward (not recorded: estimated)")
	}
	transient := m.LargestTransient
	if rest.Loss > 0 { // the logits, then the loss over them
		r.sim.alloc(r.scaled(m.trace.oomSize, false))
		r.sim.alloc(r.scaled(rest.Loss, false))
		r.note("the loss (not recorded: estimated)")
		transient = m.trace.oomSize
	}
	if !m.trace.oomInBwd {
		r.bwd = true
		if b := r.sim.alloc(r.scaled(transient, false)); b != nil {
			r.note("backward (not recorded: estimated)")
			r.sim.free(b)
		}
	}
	if rest.State == 0 {
		return
	}
	// The optimizer step: weights, gradients, state and one list of temporaries.
	state := m.stateBytes()
	if r.v.Optimizer8bit {
		state /= 4
	}
	opt := m.trace.weights + 2*m.gradBytes() + state
	if opt > r.out.Allocated {
		r.out.Allocated, r.out.Phase = opt, "optimizer step (not recorded: estimated)"
	}
	r.out.Reserved = max(r.out.Reserved, opt+opt/50)
	if r.sim.limit > 0 && opt > r.sim.limit {
		r.sim.oom = true
	}
}

func (r *fitReplay) phase(a *fitAlloc) string {
	switch {
	case a.opt:
		return "optimizer step"
	case a.bwd:
		return "backward"
	}
	return "forward"
}

// note keeps the highest levels so far.
func (r *fitReplay) note(phase string) {
	extra := int64(0)
	if r.recompute > 0 && r.bwd {
		extra = r.recompute // a recomputation runs in backward only
	}
	if a := r.sim.allocated + extra; a > r.out.Allocated {
		r.out.Allocated, r.out.Phase = a, phase
	}
	r.out.Reserved = max(r.out.Reserved, r.sim.reserved+extra, r.sim.peakReserved)
}

// savedAtPeak is the most activations saved for backward alive at once, at the recorded size.
func (m *FitModel) savedAtPeak() int64 {
	var live, top int64
	for _, e := range m.trace.ev {
		_, a := fitEvent(e, m.trace)
		if !a.saved || a.cls != fitTokens {
			continue
		}
		if e > 0 {
			live += a.size
		} else {
			live -= a.size
		}
		top = max(top, live)
	}
	return top
}
