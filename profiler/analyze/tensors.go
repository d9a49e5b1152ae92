package analyze

import (
	"regexp"
	"sort"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

// Named tensors: the agent's walk (jupyter/vramscope/_tensors.py) names CUDA
// tensor storages by what they are; a storage's data pointer is its
// allocator block's address. Blocks allocated before recording started (all
// of them, at an out-of-memory error between two sampled windows) get their
// origin and category from these names instead of counting as unknown.

// Tensors is the "named_tensors" section of a result: what the agent named
// among the blocks alive when the snapshot was taken, and how much of that
// memory is named at all (by a tensor name or by a recorded user line).
type Tensors struct {
	TookMS     float64       `json:"walk_ms"`
	Truncated  bool          `json:"truncated"`
	Objects    int64         `json:"objects"`
	Entries    int           `json:"entries"`
	Error      string        `json:"error,omitempty"`
	LiveBytes  int64         `json:"live_bytes"`  // allocated when the snapshot was taken
	NamedBytes int64         `json:"named_bytes"` // of those, in blocks with a tensor name
	LineBytes  int64         `json:"line_bytes"`  // in blocks without one whose stack names a user line or phase
	NamedShare float64       `json:"named_share"` // (named + line) / live
	Groups     []TensorGroup `json:"groups"`      // largest first
}

// TensorGroup is one name, or the same name in every layer of a stack of
// modules ("model.transformer.h.*.mlp.c_fc.weight"), with the live bytes of
// its blocks.
type TensorGroup struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Module  string `json:"module,omitempty"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Bytes   int64  `json:"bytes"`
	Tensors int    `json:"tensors"`
}

// maxTensorGroups bounds the section.
const maxTensorGroups = 50

// CatUnknown is memory allocated before recording started that nothing
// named: used only when the agent named tensors, so that what it could not
// name is not passed off as parameters.
const CatUnknown = "unknown"

type tensorIndex struct {
	walk   *profiler.TensorNames
	byAddr map[[2]uint64]*profiler.NamedTensor // (device, addr)
	groups map[groupKey]*TensorGroup
	origin map[groupKey]int32
}

type groupKey struct{ kind, name string }

func newTensorIndex(w *profiler.TensorNames) *tensorIndex {
	if w == nil {
		return nil
	}
	x := &tensorIndex{walk: w, byAddr: make(map[[2]uint64]*profiler.NamedTensor, len(w.Entries)),
		groups: map[groupKey]*TensorGroup{}, origin: map[groupKey]int32{}}
	for i := range w.Entries {
		e := &w.Entries[i]
		x.byAddr[[2]uint64{uint64(e.Device), e.Addr}] = e
	}
	return x
}

// at is the name of the block at addr on dev, if the agent named it.
func (x *tensorIndex) at(dev int, addr uint64) *profiler.NamedTensor {
	if x == nil {
		return nil
	}
	return x.byAddr[[2]uint64{uint64(dev), addr}]
}

var (
	layerIndex = regexp.MustCompile(`\.\d+(\.|$| )`)
	listIndex  = regexp.MustCompile(`\[\d+\]`)
)

// groupName puts the layers of a module stack, and the elements of a list,
// together: "h.3.mlp" -> "h.*.mlp", "kept[17] in main" -> "kept[*] in main".
func groupName(s string) string {
	return listIndex.ReplaceAllString(layerIndex.ReplaceAllString(s, ".*$1"), "[*]")
}

func (x *tensorIndex) key(e *profiler.NamedTensor) groupKey {
	return groupKey{kind: e.Kind, name: groupName(e.Name)}
}

// count adds a live block named e to its group.
func (x *tensorIndex) count(e *profiler.NamedTensor, size int64) {
	k := x.key(e)
	g := x.groups[k]
	if g == nil {
		g = &TensorGroup{Name: k.name, Kind: e.Kind, Module: groupName(e.Module), File: e.File, Line: e.Line}
		x.groups[k] = g
	}
	g.Bytes += size
	g.Tensors++
}

// tensorOrigin is the synthetic origin of a named block: its group, or the
// user line of a local in the user's own code.
func (a *analysis) tensorOrigin(e *profiler.NamedTensor) int32 {
	x := a.names
	k := x.key(e)
	if id, ok := x.origin[k]; ok {
		return id
	}
	s := synthetic{kind: "tensor", label: "[" + e.Kind + "] " + k.name}
	if e.Kind == "local" && profiler.IsUserFile(e.File) {
		s.call = profiler.Frame{File: e.File, Line: e.Line, Func: k.name}
	}
	id := a.origins.add(s)
	x.origin[k] = id
	return id
}

// tensorCategory is the memory category of what a tensor is.
func tensorCategory(kind string) string {
	switch kind {
	case "parameter", "buffer":
		return CatParameter
	case "gradient":
		return CatGradient
	case "optimizer_state":
		return CatOptimizerState
	case "activation":
		return CatActivation
	case "kv_cache":
		return CatKVCache
	}
	return CatOther // locals and attributes: kept, not saved for backward
}

// section builds the named_tensors section from what device() counted.
func (x *tensorIndex) section(live, named, lines int64) *Tensors {
	if x == nil {
		return nil
	}
	t := &Tensors{TookMS: x.walk.TookMS, Truncated: x.walk.Truncated, Objects: x.walk.Objects,
		Entries: len(x.walk.Entries), Error: x.walk.Error, LiveBytes: live, NamedBytes: named, LineBytes: lines,
		Groups: []TensorGroup{}}
	if live > 0 {
		t.NamedShare = float64(named+lines) / float64(live)
	}
	for _, g := range x.groups {
		t.Groups = append(t.Groups, *g)
	}
	sort.Slice(t.Groups, func(i, j int) bool {
		a, b := t.Groups[i], t.Groups[j]
		if a.Bytes != b.Bytes {
			return a.Bytes > b.Bytes
		}
		return a.Kind+a.Name < b.Kind+b.Name
	})
	if len(t.Groups) > maxTensorGroups {
		t.Groups = t.Groups[:maxTensorGroups]
	}
	return t
}

// countNamed counts one block alive at snapshot time for the section.
func (a *analysis) countNamed(name *profiler.NamedTensor, o int32, size int64) {
	a.liveBytes += size
	switch {
	case name != nil:
		a.namedBytes += size
		a.names.count(name, size)
		if name.Module != "" {
			x := a.origins.at(o)
			x.module = flame.JoinModules(x.module, name.Module)
		}
	case a.origins.names(o):
		a.lineBytes += size
	}
}

// namedLive maps the blocks the trace allocated that are still alive at the
// end (so the block at that address when the agent looked is the same one)
// and that the agent named, by seq, to their tensor's category.
func (a *analysis) namedLive(dev int, t *tracker) map[int64]string {
	if a.names == nil {
		return nil
	}
	out := map[int64]string{}
	for addr, b := range t.live {
		if nt := a.names.at(dev, addr); nt != nil {
			out[b.seq] = tensorCategory(nt.Kind)
		}
	}
	return out
}
