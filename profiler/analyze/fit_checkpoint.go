package analyze

// fit_checkpoint.go replays activation checkpointing of the first blocks on
// a trace. Each step's forward saves the blocks' activations before the
// head's and the loss's, in block order (fit_trace.go markBlocks), so the
// saved allocations of a step are laid over the blocks in proportion to
// what the agent named each block saving. A checkpointed block's saved allocations are made and freed at
// once in forward (nothing keeps them) and its input is kept instead; in
// backward, the first of them the trace frees is where the block's forward
// runs again: all its saved allocations are made anew, then freed as the
// trace frees them.

// fitCkpt is a replay's checkpointing state.
type fitCkpt struct {
	module  []int         // by allocation: the checkpointed block it belongs to, -1 none
	pending map[int][]int // by block: its saved allocations, made and freed in forward, not recomputed yet
	kept    map[int]*simBlock
	// casts: the weights' casts (fit_casts.go) the checkpointed blocks made
	// in this forward. Autocast's cache holds them until its region ends, so
	// they stay alive to the forward's end, checkpointed or not (the
	// H200's gpt2m plan with 14 blocks checkpointed was predicted 3% low
	// when they were freed at once), then go; recomputation makes them again.
	casts []int
}

// newFitCkpt assigns the saved allocations to the checkpointed blocks.
func newFitCkpt(ft *fitTrace, mods []FitModule, chosen []int) *fitCkpt {
	c := &fitCkpt{module: make([]int, len(ft.allocs)), pending: map[int][]int{}, kept: map[int]*simBlock{}}
	on := map[int]bool{}
	for _, i := range chosen {
		on[i] = true
	}
	step, saved := ft.stepOf(), float64(ft.blocksSaved())
	cum := make([]int64, len(ft.region))
	for i := range ft.allocs {
		a, w := &ft.allocs[i], step[i]
		c.module[i] = -1
		if !a.inBlocks || ft.region[w] == 0 {
			continue
		}
		// The region's bytes laid over the blocks in proportion to what each saved.
		at := int64(float64(cum[w]) * saved / float64(ft.region[w]))
		if m := moduleAt(mods, at); m >= 0 && on[m] {
			c.module[i] = m
		}
		cum[w] += a.size
	}
	return c
}

// moduleAt is the block whose share of the saved bytes holds offset cum.
func moduleAt(mods []FitModule, cum int64) int {
	var end int64
	for i, m := range mods {
		end += m.Saved
		if cum < end {
			return i
		}
	}
	return -1
}

// ckptAllocate replays allocation i of a checkpointed block in forward; false
// when i is not in one.
func (r *fitReplay) ckptAllocate(i int, size int64, phase string) bool {
	c := r.ckpt
	if c == nil || c.module[i] < 0 {
		return false
	}
	m := c.module[i]
	if c.kept[m] == nil {
		kept := r.m.Modules[m].Kept
		c.kept[m] = r.sim.alloc(r.scaled(max(kept, 512), false))
	}
	c.pending[m] = append(c.pending[m], i)
	if r.m.trace.allocs[i].fixedShare > 0 {
		r.blocks[i] = r.sim.alloc(size)
		r.note(phase)
		c.casts = append(c.casts, i)
		return true
	}
	if b := r.sim.alloc(size); b != nil {
		r.note(phase)
		r.sim.free(b)
	}
	return true
}

// ckptEndForward frees the checkpointed blocks' casts as backward begins.
func (r *fitReplay) ckptEndForward() {
	c := r.ckpt
	if c == nil || len(c.casts) == 0 {
		return
	}
	for _, i := range c.casts {
		if b := r.blocks[i]; b != nil {
			r.sim.free(b)
			r.blocks[i] = nil
		}
	}
	c.casts = c.casts[:0]
}

// ckptRecompute runs a checkpointed block's forward again when backward
// first frees one of its allocations.
func (r *fitReplay) ckptRecompute(i int) {
	c := r.ckpt
	if c == nil || c.module[i] < 0 {
		return
	}
	m := c.module[i]
	for _, j := range c.pending[m] {
		r.blocks[j] = r.sim.alloc(r.sizeOf(&r.m.trace.allocs[j]))
		r.note("backward (recomputing " + r.m.Modules[m].Short + ")")
	}
	delete(c.pending, m)
	if k := c.kept[m]; k != nil {
		r.sim.free(k)
		delete(c.kept, m)
	}
}
