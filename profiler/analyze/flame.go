package analyze

import (
	"path/filepath"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

// wrappers are library frames that only forward a call (nn.Module's call
// machinery, decorators); folding them keeps flame graphs about the model.
var wrappers = map[string]bool{
	"_call_impl": true, "_wrapped_call_impl": true, "decorate_context": true,
	"wrapper": true, "inner": true, "_fn": true, "forward_call": true,
}

// FlameOptions choose the weight and whether to fold wrapper frames.
type FlameOptions struct {
	Weight       flame.Weight
	KeepWrappers bool
}

// Flame builds the flame graph of a result.
func (r *Result) Flame(opt FlameOptions) *flame.Tree {
	if opt.Weight == "" {
		opt.Weight = flame.WeightPeak
	}
	t := flame.NewTree(filepath.Base(r.File), opt.Weight)
	r.origins.each(func(id int32, x *origin) {
		v, n := x.peakBytes, x.peakCount
		switch opt.Weight {
		case flame.WeightAlloc:
			v, n = x.allocBytes, x.allocs
		case flame.WeightCurrent:
			v, n = x.currentBytes, x.currentCount
		}
		if v == 0 {
			return
		}
		t.AddModule(r.framePath(id, !opt.KeepWrappers), v, n, x.module)
	})
	t.Finish()
	if r.qualnames != nil {
		t.Label(r.qualnames)
	}
	return t
}

// framePath is an origin's path root first, mapped to local files, optionally
// without wrapper frames.
func (r *Result) framePath(id int32, fold bool) []profiler.Frame {
	p := r.origins.path(id)
	out := p[:0]
	for i, f := range p {
		if fold && i < len(p)-1 && wrappers[f.Func] && !profiler.IsUserFile(f.File) {
			continue
		}
		f.File = r.paths.Map(f.File)
		out = append(out, f)
	}
	return out
}

// Origin is one attributed stack with its totals, for exporters (pprof).
type Origin struct {
	Frames       []profiler.Frame // root first, files mapped
	PeakBytes    int64
	PeakCount    int64
	AllocBytes   int64
	Allocs       int64
	CurrentBytes int64
	CurrentCount int64
}

// Origins lists every attributed stack.
func (r *Result) Origins() []Origin {
	var out []Origin
	r.origins.each(func(id int32, x *origin) {
		out = append(out, Origin{Frames: r.framePath(id, false), PeakBytes: x.peakBytes, PeakCount: x.peakCount,
			AllocBytes: x.allocBytes, Allocs: x.allocs, CurrentBytes: x.currentBytes, CurrentCount: x.currentCount})
	})
	return out
}
