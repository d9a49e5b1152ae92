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
	for i, b := range d.preBlocks {
		if b.cat == CatParameter {
			params[b.size]++
		}
		ft.allocs = append(ft.allocs, fitAlloc{size: b.size, cls: stateClass(b.cat), saved: b.cat == CatActivation})
		ft.ev = append(ft.ev, int32(i+1))
	}
	halves := halfSizes(params)
	ft.oomAt = len(ft.ev)
	lt.noteFailure(ft, t, params, halves)
	ft.finish(lt, d, halves)
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
