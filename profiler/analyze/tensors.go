package analyze

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

// Named tensors: the agent's walk (jupyter/vramscope/agent/_tensors.py) names CUDA
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
	// Growing: a holder of many entries of one shape family, a cache that
	// grows (holderGrows).
	Growing bool `json:"growing,omitempty"`
	// MadeFile and MadeLine are the user line that allocated most of its
	// blocks, by the stacks recorded for them (a holder's File and Line are
	// where its frame was when the agent looked: for a local, the line that
	// frame was running, not the one that fills it); MadeBytes are the
	// bytes allocated there.
	MadeFile  string `json:"made_file,omitempty"`
	MadeLine  int    `json:"made_line,omitempty"`
	MadeBytes int64  `json:"made_bytes,omitempty"`
}

// MadeAt is where the group's tensors were made, else where it was found.
func (g *TensorGroup) MadeAt() (string, int) {
	if g.MadeFile != "" {
		return g.MadeFile, g.MadeLine
	}
	return g.File, g.Line
}

// madeElsewhere: the recorded stacks name a line other than the holder's.
func (g *TensorGroup) madeElsewhere() bool {
	return g.MadeFile != "" && (g.MadeFile != g.File || g.MadeLine != g.Line)
}

// madeText says where the group's tensors were made, when madeElsewhere.
func (g *TensorGroup) madeText() string {
	if !g.madeElsewhere() {
		return ""
	}
	return fmt.Sprintf(", %s of them made at %s:%d", fb(g.MadeBytes), g.MadeFile, g.MadeLine)
}

// evidenceLines are the holder's line and, when the recorded stacks name
// another, the line that made its tensors.
func (g *TensorGroup) evidenceLines() []EvidenceLine {
	var out []EvidenceLine
	if g.File != "" && g.Line > 0 {
		out = append(out, EvidenceLine{File: g.File, Line: g.Line, Bytes: g.Bytes, Note: g.Name})
	}
	if g.madeElsewhere() {
		out = append(out, EvidenceLine{File: g.MadeFile, Line: g.MadeLine, Bytes: g.MadeBytes, Note: g.Name + ": made here"})
	}
	return out
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
	family map[groupKey]*shapeFamily
	made   map[groupKey]map[profiler.Frame]int64 // bytes by the user line that allocated them
}

type groupKey struct{ kind, name string }

// shapeFamily is what a group's tensors' shapes have in common: their rank,
// while all have one (-1: some have none or ranks differ).
type shapeFamily struct{ rank int }

func newTensorIndex(w *profiler.TensorNames) *tensorIndex {
	if w == nil {
		return nil
	}
	x := &tensorIndex{walk: w, byAddr: make(map[[2]uint64]*profiler.NamedTensor, len(w.Entries)),
		groups: map[groupKey]*TensorGroup{}, origin: map[groupKey]int32{}, family: map[groupKey]*shapeFamily{},
		made: map[groupKey]map[profiler.Frame]int64{}}
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

var layerIndex = regexp.MustCompile(`\.\d+(\.|$| )`)

// groupName puts the layers of a module stack, and the entries of a list or
// a dict, together: "h.3.mlp" -> "h.*.mlp", "kept[17] in main" -> "kept[*]
// in main", "masks._CACHE[(16, 512, 4821)]" -> "masks._CACHE[*]".
func groupName(s string) string {
	return subscripts(layerIndex.ReplaceAllString(s, ".*$1"))
}

// subscripts replaces each outermost [...] of s by [*]; brackets inside a
// quoted key ("d['a]']") do not count. An unclosed bracket is left as is.
func subscripts(s string) string {
	if !strings.Contains(s, "[") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		end := -1
		if s[i] == '[' {
			end = closing(s, i)
		}
		if end < 0 {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString("[*]")
		i = end
	}
	return b.String()
}

// closing is the index of the bracket that closes the one at s[open], or -1.
func closing(s string, open int) int {
	depth, quote := 0, byte(0)
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '[' || c == '(':
			depth++
		case c == ']' || c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func (x *tensorIndex) key(e *profiler.NamedTensor) groupKey {
	return groupKey{kind: e.Kind, name: groupName(e.Name)}
}

// count adds a live block named e to its group, whose key it returns.
func (x *tensorIndex) count(e *profiler.NamedTensor, size int64) groupKey {
	k := x.key(e)
	g := x.groups[k]
	if g == nil {
		g = &TensorGroup{Name: k.name, Kind: e.Kind, Module: groupName(e.Module), File: e.File, Line: e.Line}
		x.groups[k] = g
	}
	g.Bytes += size
	g.Tensors++
	f := x.family[k]
	switch {
	case f == nil && len(e.Shape) > 0:
		x.family[k] = &shapeFamily{rank: len(e.Shape)}
	case f == nil:
		x.family[k] = &shapeFamily{rank: -1}
	case f.rank != len(e.Shape):
		f.rank = -1
	}
	return k
}

// minGrowingEntries is the fewest tensors a growing holder has. A model's
// per-layer tensors are held by names with an attribute after the index
// ("cache.layers[*].k"), which holderGrows leaves out; what grows step after
// step holds its tensors directly ("kept[*]", "masks._CACHE[*]",
// "fn.<lru_cache>[*]") or per key and entry ("SERVER.sessions[*][*].v").
const minGrowingEntries = 8

// holderGrows tells a group that is a cache that grows: kept by a global, a
// module attribute or a local (key/value caches and the model's own tensors
// are sized by design), in a container that holds its tensors directly or
// nested in two, with minGrowingEntries tensors or more all of one rank.
func (x *tensorIndex) holderGrows(k groupKey, g *TensorGroup) bool {
	if !slices.Contains([]string{"global", "attribute", "local"}, g.Kind) || g.Tensors < minGrowingEntries {
		return false
	}
	if f := x.family[k]; f == nil || f.rank < 0 {
		return false
	}
	name, _, _ := strings.Cut(g.Name, " in ") // a local's name, without where it is
	return strings.HasSuffix(name, "[*]") || strings.Count(name, "[*]") >= 2
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
	if (e.Kind == "local" || e.Kind == "global") && e.Line > 0 && profiler.IsUserFile(e.File) {
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
	for k, g := range x.groups {
		g.Growing = x.holderGrows(k, g)
		g.MadeFile, g.MadeLine, g.MadeBytes = x.madeAt(k)
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

// madeBy counts size bytes of group k as allocated at line f.
func (x *tensorIndex) madeBy(k groupKey, f profiler.Frame, size int64) {
	if x.made[k] == nil {
		x.made[k] = map[profiler.Frame]int64{}
	}
	x.made[k][profiler.Frame{File: f.File, Line: f.Line}] += size
}

// madeAt is the user line that allocated the most of group k's bytes, among
// the blocks whose stacks were recorded (ties: the first line in the file).
func (x *tensorIndex) madeAt(k groupKey) (string, int, int64) {
	var best profiler.Frame
	var top int64
	for f, n := range x.made[k] {
		if n > top || n == top && (f.File < best.File || f.File == best.File && f.Line < best.Line) {
			best, top = f, n
		}
	}
	return best.File, best.Line, top
}

// countNamed counts one block alive at snapshot time for the section; o is
// its origin, whose recorded stack may say which user line allocated it.
func (a *analysis) countNamed(name *profiler.NamedTensor, o int32, size int64) {
	a.liveBytes += size
	switch {
	case name != nil:
		a.namedBytes += size
		k := a.names.count(name, size)
		if f, ok := a.origins.allocLine(o); ok {
			a.names.madeBy(k, f, size)
		}
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
