package torchsnap

import (
	"fmt"
	"math"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// tensorNames reads the agent's "vramscope_tensors" entry: {"version": 1,
// "took_ms", "truncated", "objects", "routes", "memory_caps": [[device, bytes], ...],
// "entries": [[device, addr,
// bytes, kind, name, module, file, line, shape], ...], "methods": [...]} (shape, a list
// of ints or None, since the walk reached holders; older agents send eight fields). Entries of a shape it does
// not know are skipped, so a newer agent's snapshot still reads; a value
// that is not a dict at all is an error.
func tensorNames(v pickle.Value) (*profiler.TensorNames, error) {
	if v.Kind != pickle.DictKind {
		return nil, fmt.Errorf("\"vramscope_tensors\" is a %s, not a dict", v.TypeName())
	}
	d := v.Ref.(*pickle.Dict)
	out := &profiler.TensorNames{Objects: getInt(d, "objects")}
	if t, ok := d.Get("took_ms"); ok {
		out.TookMS = duration(t)
	}
	if t, ok := d.Get("truncated"); ok {
		out.Truncated, _ = t.AsBool()
	}
	if r, ok := d.Get("routes"); ok && r.Kind == pickle.DictKind {
		out.Error = getString(r.Ref.(*pickle.Dict), "error")
	}
	out.Methods = methods(d)
	out.MemoryCaps = memoryCaps(d)
	entries, _ := d.Get("entries")
	items, _ := entries.Items()
	for _, it := range items {
		f, ok := it.Items()
		if !ok || len(f) < 8 {
			continue
		}
		dev, ok1 := f[0].AsInt()
		addr, ok2 := f[1].AsUint()
		n, ok3 := f[2].AsInt()
		kind, ok4 := f[3].AsString()
		name, ok5 := f[4].AsString()
		if !(ok1 && ok2 && ok3 && ok4 && ok5) || n <= 0 || n > MaxBytes || addr == 0 {
			continue
		}
		module, _ := f[5].AsString()
		file, _ := f[6].AsString()
		line, _ := f[7].AsInt()
		out.Entries = append(out.Entries, profiler.NamedTensor{Device: int(dev), Addr: addr, Bytes: n, Kind: kind,
			Name: name, Module: module, File: file, Line: int(line), Shape: shape(f[8:])})
	}
	return out, nil
}

// duration reads the walk's took_ms: a number of milliseconds, or 0 when it
// is not one (NaN, ±Inf or negative: JSON cannot carry the first two, and a
// summary holding one failed to encode).
func duration(v pickle.Value) float64 {
	ms, _ := v.AsFloat()
	if math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 {
		return 0
	}
	return ms
}

// shape reads an entry's ninth field, a tensor's shape: nil when absent, not
// a list, or holding anything but ints.
func shape(rest []pickle.Value) []int64 {
	if len(rest) == 0 {
		return nil
	}
	dims, ok := rest[0].Items()
	if !ok || len(dims) == 0 || len(dims) > 64 {
		return nil
	}
	out := make([]int64, len(dims))
	for i, d := range dims {
		if out[i], ok = d.AsInt(); !ok {
			return nil
		}
	}
	return out
}

// methods reads "methods": [[file, first line, last line, qualname, [module
// path, ...]], ...]
// (agents before it wrote none); malformed rows are skipped.
func methods(d *pickle.Dict) []profiler.Method {
	v, _ := d.Get("methods")
	items, _ := v.Items()
	var out []profiler.Method
	for _, it := range items {
		f, ok := it.Items()
		if !ok || len(f) < 4 {
			continue
		}
		file, ok1 := f[0].AsString()
		first, ok2 := f[1].AsInt()
		last, ok3 := f[2].AsInt()
		qual, ok4 := f[3].AsString()
		if !(ok1 && ok2 && ok3 && ok4) || file == "" || qual == "" || first <= 0 || last < first {
			continue
		}
		m := profiler.Method{File: file, First: int(first), Last: int(last), Qual: qual}
		if len(f) > 4 {
			paths, _ := f[4].Items()
			for _, p := range paths {
				if s, ok := p.AsString(); ok && s != "" {
					m.Modules = append(m.Modules, s)
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// memoryCaps reads "memory_caps": [[device, bytes], ...], the per-process
// caps the agent read; pairs out of range are skipped.
func memoryCaps(d *pickle.Dict) map[int]int64 {
	v, ok := d.Get("memory_caps")
	if !ok {
		return nil
	}
	items, _ := v.Items()
	var caps map[int]int64
	for _, it := range items {
		f, ok := it.Items()
		if !ok || len(f) != 2 {
			continue
		}
		dev, ok1 := f[0].AsInt()
		n, ok2 := f[1].AsInt()
		if !ok1 || !ok2 || dev < 0 || dev >= MaxDevices || n <= 0 || n > MaxBytes {
			continue
		}
		if caps == nil {
			caps = map[int]int64{}
		}
		caps[int(dev)] = n
	}
	return caps
}
