// Package pprofenc writes an analysis as a pprof profile (gzipped protobuf),
// so `go tool pprof` and every pprof viewer can open GPU memory like heap
// memory: inuse_space is bytes live at the peak, alloc_space and
// alloc_objects everything allocated over the trace.
package pprofenc

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// Build converts a result into a pprof profile.
func Build(r *analyze.Result) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "inuse_space", Unit: "bytes"},
			{Type: "alloc_space", Unit: "bytes"},
			{Type: "alloc_objects", Unit: "count"},
		},
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		TimeNanos:         r.Peak.TimeUS * 1000,
		Comments:          []string{"vramscope: CUDA caching-allocator snapshot " + r.File},
	}
	b := builder{p: p, fn: map[[2]string]*profile.Function{}, loc: map[profiler.Frame]*profile.Location{}}
	for _, o := range r.Origins() {
		if o.PeakBytes == 0 && o.AllocBytes == 0 {
			continue
		}
		s := &profile.Sample{Value: []int64{o.PeakBytes, o.AllocBytes, o.Allocs}}
		for i := len(o.Frames) - 1; i >= 0; i-- { // pprof wants the leaf first
			s.Location = append(s.Location, b.location(o.Frames[i]))
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

// Write writes the gzipped profile.
func Write(w io.Writer, r *analyze.Result) error {
	p := Build(r)
	if err := p.CheckValid(); err != nil {
		return err
	}
	return p.Write(w)
}

type builder struct {
	p   *profile.Profile
	fn  map[[2]string]*profile.Function
	loc map[profiler.Frame]*profile.Location
}

func (b *builder) location(f profiler.Frame) *profile.Location {
	if l := b.loc[f]; l != nil {
		return l
	}
	key := [2]string{f.Func, f.File}
	fn := b.fn[key]
	if fn == nil {
		fn = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: qualified(f), SystemName: f.Func, Filename: f.File}
		b.fn[key] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Line: []profile.Line{{Function: fn, Line: int64(f.Line)}}}
	b.loc[f] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

// qualified names a Python function by its module file, as pprof groups by
// name: without it every nn.Module's "forward" would fold into one row.
func qualified(f profiler.Frame) string {
	if f.File == "" {
		return f.Func
	}
	return strings.TrimSuffix(filepath.Base(f.File), ".py") + "." + f.Func
}
