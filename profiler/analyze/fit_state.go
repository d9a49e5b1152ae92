package analyze

// fit_state.go: a snapshot with no trace (the agent's default at an
// out-of-memory error) still says what was alive when it failed, each block
// named by the agent's walk. Its one moment, the blocks alive and the
// request that failed, is a trace of its own: enough to scale, though not
// to see the rest of the step.

// fitPreBlock is a block alive at the snapshot that the trace never allocated.
type fitPreBlock struct {
	size int64
	cat  string
}

// fitState is the trace of the blocks alive at the snapshot and the last
// failed request; nil with no failure (a live snapshot is not a step's peak).
func (lt *lifetimes) fitState(t *tracker, d *Device) *fitTrace {
	if t == nil || len(t.ooms) == 0 || len(d.preBlocks) == 0 {
		return nil
	}
	ft := &fitTrace{oomAt: -1, stateOnly: true}
	params := map[int64]int{}
	halves := map[int64]int{}
	for _, b := range d.preBlocks {
		if b.cat == CatParameter {
			params[b.size]++
			halves[blockSize(uint64(b.size/2))]++
		}
	}
	for i, b := range d.preBlocks {
		ft.allocs = append(ft.allocs, fitAlloc{size: b.size, cls: stateClass(b.cat), saved: b.cat == CatActivation})
		ft.ev = append(ft.ev, int32(i+1))
	}
	ft.oomAt = len(ft.ev)
	ft.oomSize = blockSize(uint64(t.ooms[len(t.ooms)-1].requested))
	ft.oomCls = fitTokens
	ft.oomInBwd = oomInBackward(lt.a.frames, t.ooms[len(t.ooms)-1].stack)
	if params[ft.oomSize] > 0 || halves[ft.oomSize] > 0 {
		ft.oomCls = fitFixed
	}
	ft.modules, ft.recorded, ft.blocksTotal = lt.a.names.fitModules(d.Device)
	ft.weights = weightBytes(ft, d.preBlocks)
	ft.shareCasts(halves)
	ft.markBlocks()
	return ft
}

// stateClass is how a named block grows: what the walk could not name is
// taken to grow with the batch (at a failure in forward or backward most of it does).
func stateClass(cat string) fitClass {
	switch cat {
	case CatParameter, CatGraphPool:
		return fitFixed
	case CatGradient:
		return fitGrad
	case CatOptimizerState:
		return fitState
	}
	return fitTokens
}
