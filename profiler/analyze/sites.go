package analyze

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// Site is one source line (or, for allocations without frames, one named phase)
// and the memory attributed to it.
type Site struct {
	File         string  `json:"file"`
	Line         int     `json:"line"`
	Function     string  `json:"function"`
	Kind         string  `json:"kind"` // "user", "library", "phase" or "tensor" (named by the agent)
	PeakBytes    int64   `json:"peak_bytes"`
	PeakAllocs   int64   `json:"peak_allocs"`
	CurrentBytes int64   `json:"current_bytes"`
	AllocBytes   int64   `json:"alloc_bytes"`
	Allocs       int64   `json:"allocs"`
	MaxAlloc     int64   `json:"max_alloc"`
	PeakShare    float64 `json:"peak_share"` // of the peak of all devices
	// Categories splits PeakBytes by memory category, where known.
	Categories CategoryBytes `json:"categories"`
	// Window is a phase site's place between user lines without the
	// record_function scope its Function names ("[no user frame] after
	// a.py:3"): two runs of one script can open different scopes around the
	// same pass, and diffs match phases by it. Empty for every other site.
	Window string `json:"-"`
}

// CategoryBytes is bytes by memory category (see categories.go); a struct, so
// a Site stays comparable.
type CategoryBytes struct {
	Parameter      int64 `json:"parameter,omitempty"`
	Gradient       int64 `json:"gradient,omitempty"`
	OptimizerState int64 `json:"optimizer_state,omitempty"`
	Activation     int64 `json:"activation,omitempty"`
	Temporary      int64 `json:"temporary,omitempty"`
	Other          int64 `json:"other,omitempty"`
	Unknown        int64 `json:"unknown,omitempty"`
	KVCache        int64 `json:"kv_cache,omitempty"`
	GraphPool      int64 `json:"graph_pool,omitempty"`
}

// Add counts n bytes of category c.
func (cb *CategoryBytes) Add(c string, n int64) {
	switch c {
	case CatParameter:
		cb.Parameter += n
	case CatGradient:
		cb.Gradient += n
	case CatOptimizerState:
		cb.OptimizerState += n
	case CatActivation:
		cb.Activation += n
	case CatTemporary:
		cb.Temporary += n
	case CatOther:
		cb.Other += n
	case CatUnknown:
		cb.Unknown += n
	case CatKVCache:
		cb.KVCache += n
	case CatGraphPool:
		cb.GraphPool += n
	}
}

// addAll counts every category of o.
func (cb *CategoryBytes) addAll(o CategoryBytes) {
	for _, c := range o.all() {
		cb.Add(c.Name, c.Bytes)
	}
}

// all lists every category with its bytes: with Add, the one place a new
// category is added (TestCategoryBytesFields fails on one left out). An
// array, so that summing sites allocates nothing.
func (cb CategoryBytes) all() [9]Category {
	return [...]Category{{Name: CatParameter, Bytes: cb.Parameter}, {Name: CatGradient, Bytes: cb.Gradient},
		{Name: CatOptimizerState, Bytes: cb.OptimizerState}, {Name: CatActivation, Bytes: cb.Activation},
		{Name: CatTemporary, Bytes: cb.Temporary}, {Name: CatOther, Bytes: cb.Other}, {Name: CatUnknown, Bytes: cb.Unknown},
		{Name: CatKVCache, Bytes: cb.KVCache}, {Name: CatGraphPool, Bytes: cb.GraphPool}}
}

// Named lists the non-zero categories, largest first.
func (cb CategoryBytes) Named() []Category {
	all := cb.all()
	var total int64
	var out []Category
	for _, c := range all {
		total += c.Bytes
		if c.Bytes > 0 {
			out = append(out, c)
		}
	}
	for i := range out {
		out[i].Share = float64(out[i].Bytes) / float64(total)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}

// Stack is one attributed call stack with its totals.
type Stack struct {
	Frames       []profiler.Frame `json:"frames"` // root first
	PeakBytes    int64            `json:"peak_bytes"`
	CurrentBytes int64            `json:"current_bytes"`
	AllocBytes   int64            `json:"alloc_bytes"`
	Allocs       int64            `json:"allocs"`
}

// Coverage says how much of the memory live at the peak lands on a user line,
// on a named phase (frameless runs, pre-trace blocks) or nowhere useful.
type Coverage struct {
	PeakBytes int64 `json:"peak_bytes"`
	UserLine  int64 `json:"user_line_bytes"`
	Phase     int64 `json:"phase_bytes"`
	Tensor    int64 `json:"tensor_bytes"` // named by the agent's tensor walk (tensors.go)
	Library   int64 `json:"library_only_bytes"`
	// Unknown was allocated before recording started and nothing named it.
	Unknown    int64   `json:"unknown_bytes"`
	Attributed float64 `json:"attributed_share"` // (user + phase + tensor) / peak: only what is named
}

type siteKey struct {
	file, fn string
	line     int
	kind     string
	window   string // Site.Window
}

// sites aggregates origins by their first user frame and by their innermost frame.
func (a *analysis) sites(peak int64) (user, leaf []Site, cov Coverage) {
	um, lm := map[siteKey]*Site{}, map[siteKey]*Site{}
	var total int64
	a.origins.each(func(id int32, x *origin) {
		total += x.peakBytes
		uk, lk := a.siteKeys(id)
		addSite(um, uk, x)
		addSite(lm, lk, x)
		switch {
		case uk.kind == "user":
			cov.UserLine += x.peakBytes
		case id < 0 && a.origins.syn[-id-1].kind == "pretrace":
			cov.Unknown += x.peakBytes
		case uk.kind == "tensor":
			cov.Tensor += x.peakBytes
		case uk.kind == "phase":
			cov.Phase += x.peakBytes
		default:
			cov.Library += x.peakBytes
		}
	})
	cov.PeakBytes = total
	if total > 0 {
		cov.Attributed = float64(cov.UserLine+cov.Phase+cov.Tensor) / float64(total)
	}
	return sortSites(um, peak), sortSites(lm, peak), cov
}

func (a *analysis) siteKeys(id int32) (user, leaf siteKey) {
	if id < 0 {
		s := a.origins.syn[-id-1]
		k := siteKey{fn: s.label, kind: "phase", window: s.window}
		if s.kind == "tensor" {
			k.kind = "tensor"
		}
		if s.call.File != "" {
			k = siteKey{file: s.call.File, fn: s.call.Func, line: s.call.Line, kind: "user"}
		}
		if s.kind == "gap" {
			leaf = siteKey{fn: noStack, kind: "phase"}
			if stack := a.frames.StackAt(s.stack); len(stack) > 0 {
				in := a.frames.FrameAt(stack[0])
				leaf = siteKey{file: in.File, fn: in.Func, line: in.Line, kind: kindOf(in.File)}
			}
			return k, leaf
		}
		return k, k
	}
	stack := a.frames.StackAt(profiler.StackID(id))
	if len(stack) == 0 {
		k := siteKey{fn: "[no frames]", kind: "phase"}
		return k, k
	}
	in := a.frames.FrameAt(stack[0])
	leaf = siteKey{file: in.File, fn: in.Func, line: in.Line, kind: kindOf(in.File)}
	if f, ok := a.origins.userFrame(profiler.StackID(id)); ok {
		return siteKey{file: f.File, fn: f.Func, line: f.Line, kind: "user"}, leaf
	}
	return leaf, leaf
}

func kindOf(file string) string {
	if profiler.IsUserFile(file) {
		return "user"
	}
	return "library"
}

func addSite(m map[siteKey]*Site, k siteKey, x *origin) {
	s := m[k]
	if s == nil {
		s = &Site{File: k.file, Line: k.line, Function: k.fn, Kind: k.kind, Window: k.window}
		m[k] = s
	}
	s.Add(x.totals())
}

// totals is an origin's memory as a Site's figures (no place, no share).
func (x *origin) totals() Site {
	t := Site{PeakBytes: x.peakBytes, PeakAllocs: x.peakCount, CurrentBytes: x.currentBytes,
		AllocBytes: x.allocBytes, Allocs: x.allocs, MaxAlloc: x.maxAlloc}
	for c, n := range x.cats {
		t.Categories.Add(c, n)
	}
	return t
}

// Add counts o's memory into s: the totals, shares and categories add up, the
// largest single allocation is the larger of the two. The engine sums a
// site's origins with it, and the language server the sites of one line.
func (s *Site) Add(o Site) {
	s.PeakBytes += o.PeakBytes
	s.PeakAllocs += o.PeakAllocs
	s.CurrentBytes += o.CurrentBytes
	s.AllocBytes += o.AllocBytes
	s.Allocs += o.Allocs
	s.MaxAlloc = max(s.MaxAlloc, o.MaxAlloc)
	s.PeakShare += o.PeakShare
	s.Categories.addAll(o.Categories)
}

func sortSites(m map[siteKey]*Site, peak int64) []Site {
	out := make([]Site, 0, len(m))
	for _, s := range m {
		if peak > 0 {
			s.PeakShare = float64(s.PeakBytes) / float64(peak)
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.PeakBytes != b.PeakBytes {
			return a.PeakBytes > b.PeakBytes
		}
		if a.AllocBytes != b.AllocBytes {
			return a.AllocBytes > b.AllocBytes
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Function < b.Function
	})
	return out
}

// topStacks lists the n stacks holding most at the peak (then most allocated).
func (a *analysis) topStacks(n int) []Stack {
	var out []Stack
	a.origins.each(func(id int32, x *origin) {
		out = append(out, Stack{Frames: a.origins.path(id), PeakBytes: x.peakBytes, CurrentBytes: x.currentBytes,
			AllocBytes: x.allocBytes, Allocs: x.allocs})
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].PeakBytes != out[j].PeakBytes {
			return out[i].PeakBytes > out[j].PeakBytes
		}
		return out[i].AllocBytes > out[j].AllocBytes
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
