package analyze

import "github.com/vramscope/vramscope/profiler"

// fit_trace.go keeps one device's allocations in order, each classified by
// how its bytes change with the size of a step (batch × tokens), for the
// one-snapshot model of fit.go.

// fitClass says how a block's bytes change with the size of a step.
type fitClass uint8

const (
	// fitFixed does not change: weights, the optimizer step's temporaries,
	// weight-sized copies (autocast's casts), blocks from before the trace.
	fitFixed fitClass = iota
	// fitGrad is a gradient: fixed, but kept across micro-steps under
	// gradient accumulation.
	fitGrad
	// fitState is optimizer state: fixed, and alive in every later step
	// (the first step creates it after its backward).
	fitState
	// fitTokens grows with batch × tokens: activations, logits, the
	// backward's activation gradients, their temporaries.
	fitTokens
)

// fitAlloc is one allocation of the trace.
type fitAlloc struct {
	t     int64 // µs, as recorded
	size  int64 // the block's bytes (the request rounded to 512)
	cls   fitClass
	saved bool // made in forward and alive when backward began (category activation)
	bwd   bool // made with no Python stack: autograd's backward thread
	opt   bool // made inside an optimizer step (its scope or torch/optim code)
	param bool // a weight (category parameter)
	// inBlocks: saved for backward within the repeated blocks (the first
	// bytes saved in a step, up to what the agent named in the blocks), so
	// checkpointing them gives it back; the loss's saved logits are not.
	inBlocks bool
	stack    uint32
	// fixedShare is the share of a fitTokens allocation that is likely a
	// weight's cast instead (fit_casts.go): it keeps that share of its bytes.
	fixedShare float32
}

// fitTrace is a device's allocations and frees in order.
type fitTrace struct {
	// base is what was allocated before the trace and stayed alive
	// (weights loaded before recording): fixed.
	base int64
	// reservedBase is what the allocator held before the trace began.
	reservedBase int64
	allocs       []fitAlloc
	// ev is the order: i+1 allocates allocs[i], -(i+1) frees it. Blocks
	// from before the trace that the trace frees are allocated first.
	ev []int32
	// oomAt is the index in ev of the last out-of-memory failure (-1: none)
	// and oomSize the bytes it asked for.
	oomAt   int
	oomSize int64
	oomCls  fitClass
	opt     []window
	// modules are the agent's activations by repeated block (fit_modules.go).
	modules []fitModule
	// recorded is the batch and sequence length read from the agent's shapes (0: unknown).
	recorded FitSize
	// blocksTotal counts the repeated blocks the agent named weights in;
	// weights are the bytes of every weight; oomInBwd says the failure came
	// in a backward pass (fit_rest.go).
	blocksTotal int
	weights     int64
	oomInBwd    bool
	stateOnly   bool // built from the blocks alive at a failure, not from a trace (fit_state.go)
	// after is what the head and the loss saved (the agent's names);
	// region, by step, the bytes its forward saved in the blocks.
	after  int64
	region []int64
}

// fitTrace builds the trace of tracker t from its log and the categories
// classifyLog gave its entries.
func (lt *lifetimes) fitTrace(t *tracker, cats []uint8, d *Device) *fitTrace {
	n := t.log.len()
	if n == 0 {
		return lt.fitState(t, d)
	}
	if len(cats) != n {
		return nil
	}
	ft := &fitTrace{base: d.PreTraceBytes - t.preFreed, reservedBase: d.preReserved, oomAt: -1, opt: lt.opt}
	for li, c := range lt.namedByLog(t, d.Device) {
		cats[li] = uint8(lt.catIndex(c))
	}
	params := lt.paramSizes(t, cats, d.preBlocks)
	halves := halfSizes(params)
	oomLog := -1
	if len(t.ooms) > 0 && !t.truncated {
		oomLog = n - int(t.afterOOM)
		lt.noteFailure(ft, t, params, halves)
	}
	lt.readLog(ft, t, cats, oomLog)
	ft.finish(lt, d, halves)
	ft.survivors()
	ft.markBlocks()
	return ft
}

// halfSizes counts the weights by the block size of their half-width casts.
func halfSizes(params map[int64]int) map[int64]int {
	out := map[int64]int{}
	for p, n := range params {
		out[blockSize(uint64(p/2))] += n
	}
	return out
}

// noteFailure keeps the last out-of-memory request of t: its size, whether
// it grows with the batch, and whether backward made it.
func (lt *lifetimes) noteFailure(ft *fitTrace, t *tracker, params, halves map[int64]int) {
	last := t.ooms[len(t.ooms)-1]
	ft.oomSize = blockSize(uint64(last.requested))
	ft.oomInBwd = oomInBackward(lt.a.frames, last.stack)
	ft.oomCls = fitTokens
	if params[ft.oomSize] > 0 || halves[ft.oomSize] > 0 {
		ft.oomCls = fitFixed
	}
}

// readLog turns the log into allocations and events; oomLog is the log
// index the failure came before (-1: none).
func (lt *lifetimes) readLog(ft *fitTrace, t *tracker, cats []uint8, oomLog int) {
	n := t.log.len()
	idx := make([]int32, n)
	var pre []int32 // pre-trace blocks the trace frees: allocated first
	var prev int64
	for i := 0; i < n; i++ {
		if i == oomLog {
			ft.oomAt = len(ft.ev)
		}
		e := t.log.at(i)
		delta := e.cur - prev
		prev = e.cur
		at := t.firstT + e.t
		switch {
		case e.stack != 0:
			if old, ok := t.replaced[int32(i)]; ok {
				ft.ev = append(ft.ev, -(idx[old] + 1))
				delta += ft.allocs[idx[old]].size
			}
			idx[i] = int32(len(ft.allocs))
			ft.allocs = append(ft.allocs, lt.fitAllocOf(at, delta, lt.order[cats[i]], e.stack))
			ft.ev = append(ft.ev, idx[i]+1)
		case e.back > 0:
			ft.ev = append(ft.ev, -(idx[e.back-1] + 1))
		default: // a block from before the trace, freed now
			j := int32(len(ft.allocs))
			ft.allocs = append(ft.allocs, fitAlloc{t: at, size: -delta, cls: fitFixed})
			pre = append(pre, j+1)
			ft.ev = append(ft.ev, -(j + 1))
		}
	}
	if oomLog == n {
		ft.oomAt = len(ft.ev)
	}
	if len(pre) > 0 {
		ft.ev = append(pre, ft.ev...)
		if ft.oomAt >= 0 {
			ft.oomAt += len(pre)
		}
	}
}

// finish adds what the agent's names say (blocks, the recorded size), the
// weights' bytes, and which allocations are weights' casts.
func (ft *fitTrace) finish(lt *lifetimes, d *Device, halves map[int64]int) {
	ft.modules, ft.recorded, ft.blocksTotal, ft.after = lt.a.names.fitModules(d.Device)
	ft.weights = weightBytes(ft, d.preBlocks)
	ft.shareCasts(halves)
}

// blocksSaved is what the agent named saved in the repeated blocks.
func (ft *fitTrace) blocksSaved() int64 {
	var n int64
	for _, b := range ft.modules {
		n += b.Saved
	}
	return n
}

// markBlocks sets inBlocks: in each step, the forward's saved allocations
// but for the last ones, what the head and the loss saved (the blocks run
// before them). A trace without names has no blocks.
func (ft *fitTrace) markBlocks() {
	if len(ft.modules) == 0 {
		return
	}
	step := ft.stepOf()
	ft.region = make([]int64, len(ft.opt)+1)
	for i, a := range ft.allocs {
		if a.saved && a.cls == fitTokens && !a.bwd {
			ft.region[step[i]] += a.size
		}
	}
	cum := make([]int64, len(ft.region))
	for w := range ft.region {
		if !ft.stateOnly {
			ft.region[w] = max(0, ft.region[w]-ft.after)
		}
	}
	for i := range ft.allocs {
		a := &ft.allocs[i]
		if w := step[i]; a.saved && a.cls == fitTokens && !a.bwd && cum[w] < ft.region[w] {
			a.inBlocks = true
			cum[w] += a.size
		}
	}
}

// stepOf is each allocation's step: the optimizer steps that ended before it.
func (ft *fitTrace) stepOf() []int {
	out := make([]int, len(ft.allocs))
	w := 0
	for i, a := range ft.allocs {
		for w < len(ft.opt) && a.t > ft.opt[w].end {
			w++
		}
		out[i] = w
	}
	return out
}

// weightBytes sums the weights: blocks from before the trace taken for
// parameters, and the trace's allocations of category parameter.
func weightBytes(ft *fitTrace, pre []fitPreBlock) int64 {
	var w int64
	for _, b := range pre {
		if b.cat == CatParameter {
			w += b.size
		}
	}
	for _, a := range ft.allocs {
		if a.param {
			w += a.size
		}
	}
	return w
}

// fitAllocOf classifies one allocation.
func (lt *lifetimes) fitAllocOf(at, size int64, cat string, stack uint32) fitAlloc {
	a := fitAlloc{t: at, size: size, saved: cat == CatActivation, bwd: stack == 1, param: cat == CatParameter, stack: stack}
	_, inOpt := lt.optWindow(at)
	a.opt = inOpt || (stack > 1 && lt.isOptimizer(profiler.StackID(stack-1)))
	switch {
	case cat == CatGradient && !a.opt:
		a.cls = fitGrad
	case cat == CatOptimizerState:
		a.cls = fitState
	case cat == CatParameter || a.opt || size <= 512:
		a.cls = fitFixed
	default:
		a.cls = fitTokens
	}
	return a
}

// paramSizes counts the weights by block size: those allocated before
// the trace and those the trace classified as parameters.
func (lt *lifetimes) paramSizes(t *tracker, cats []uint8, pre []fitPreBlock) map[int64]int {
	out := map[int64]int{}
	for _, b := range pre {
		if b.cat == CatParameter {
			out[b.size]++
		}
	}
	var prev int64
	for i := 0; i < t.log.len(); i++ {
		e := t.log.at(i)
		delta := e.cur - prev
		prev = e.cur
		if e.stack != 0 && lt.order[cats[i]] == CatParameter {
			out[delta]++
		}
	}
	return out
}

// namedByLog is the category the agent's names give the blocks alive at the
// snapshot, by their allocation's index in the log: a name outranks what
// the block's lifetime suggests.
func (lt *lifetimes) namedByLog(t *tracker, dev int) map[int32]string {
	if lt.a.names == nil {
		return nil
	}
	out := map[int32]string{}
	for _, b := range t.live {
		if n := lt.a.names.at(dev, b.addr); n != nil && b.li >= 0 {
			out[b.li] = tensorCategory(n.Kind)
		}
	}
	return out
}

// catIndex is the index of category c in lt.order, appending it when the
// order lacks it.
func (lt *lifetimes) catIndex(c string) int {
	for i, o := range lt.order {
		if o == c {
			return i
		}
	}
	lt.order = append(lt.order[:len(lt.order):len(lt.order)], c)
	return len(lt.order) - 1
}
