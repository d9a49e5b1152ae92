package flame

import (
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// Labels for people. A snapshot names a frame by its function alone, so a
// model reads as a column of "forward" and a training loop's calls all read
// "train". Label gives each node the text the front ends draw (Node.Label):
// the class of a method, recovered from the source ("GPT2Attention.forward"),
// the module path of the memory under a forward frame, where the agent named
// it ("(model.transformer.h.*.attn)"), and the line where siblings share a
// name ("train:31", "train:35"). Name, File and Line stay the raw frame, which
// hover, collapsed stacks and pprof rely on.

// AddModule is Add for memory the agent attributed to a module (a parameter's
// module path, or the module whose forward saved an activation). Every node on
// the path keeps the part of the module paths that all its memory shares.
func (t *Tree) AddModule(path []profiler.Frame, value, count int64, module string) {
	if value == 0 && count == 0 {
		return
	}
	t.Add(path, value, count)
	if module == "" {
		return
	}
	n := t.Root
	for _, f := range t.boundedPath(path) {
		n = n.index[f]
		n.Module = JoinModules(n.Module, module)
	}
}

// Namer knows what the snapshot's frames do not say (profiler.Qualnames).
type Namer interface {
	// Of returns a frame's "Class.method", or "" where unknown.
	Of(file string, line int, fn string) string
	// Modules returns the module paths whose forward is the method qual.
	Modules(qual string) []string
}

// Label sets the labels of every node. Call it after Finish.
func (t *Tree) Label(names Namer) {
	t.Walk(func(_ []*Node, n *Node) {
		for _, c := range n.Children {
			if q := names.Of(c.File, c.Line, c.Name); q != "" && q != c.Name {
				c.Qual = q
			}
		}
	})
	t.frameModules(names)
	t.Walk(func(_ []*Node, n *Node) {
		seen := map[string]int{}
		for _, c := range n.Children {
			seen[c.shown()]++
		}
		for _, c := range n.Children {
			label := c.shown()
			if seen[label] > 1 && c.Line > 0 {
				label += ":" + strconv.Itoa(c.Line)
			}
			if c.Module != "" {
				label += " (" + c.Module + ")"
			}
			if label != c.Name {
				c.Label = label
			}
		}
	})
}

// frameModules turns the module path each node's memory shares into the
// module each forward frame runs. The memory under a forward frame is its
// submodules' (GPT2Model.forward's layer loop: all of it in
// "m.transformer.h.*"), so a forward that calls other forwards runs the
// parent of theirs ("m.transformer"); a forward that calls none runs the
// module its memory names. Where the agent recorded which module paths run a
// class's forward, that wins. Frames other than forward carry no module: it
// names a module's forward, not its callers. Children before parents.
func (t *Tree) frameModules(names Namer) {
	var order []*Node
	t.Walk(func(_ []*Node, n *Node) { order = append(order, n) })
	below := map[*Node]string{} // the module the nearest forward frames under a node run in
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		sameFunction(n.Children)
		agg, has := "", false
		for _, c := range n.Children {
			m, ok := below[c]
			if c.Name == "forward" && c.Module != "" {
				m, ok = parentModule(c.Module), true
			}
			switch {
			case !ok:
			case !has:
				agg, has = m, true
			case agg != "":
				agg = JoinModules(agg, m)
			}
		}
		if has {
			below[n] = agg
		}
		if n.Name != "forward" || n.Module == "" {
			n.Module = ""
			continue
		}
		raw := n.Module
		if has && agg != "" && modulePrefix(agg, raw) {
			n.Module = agg
		}
		if rec := recordedModule(n, names, raw); rec != "" {
			n.Module = rec
		}
	}
}

// sameFunction gives the forward frames of one function under one caller
// (its lines: GPT2Block.forward:274 and :305) one module, the one most of
// their memory reads: they are one call of one module's forward, but a line
// whose memory is all in one submodule's own tensors reads that submodule.
func sameFunction(children []*Node) {
	type fn struct{ file, name string }
	votes := map[fn]map[string]int64{}
	for _, c := range children {
		if c.Name == "forward" && c.Module != "" {
			k := fn{c.File, c.Name}
			if votes[k] == nil {
				votes[k] = map[string]int64{}
			}
			votes[k][c.Module] += c.Value
		}
	}
	for _, c := range children {
		v := votes[fn{c.File, c.Name}]
		if len(v) < 2 || c.Name != "forward" || c.Module == "" {
			continue
		}
		best, most := "", int64(-1)
		for m, b := range v {
			if b > most || b == most && m < best {
				best, most = m, b
			}
		}
		c.Module = best
	}
}

// parentModule is the module that holds m: "a.h.*.mlp" -> "a.h.*", and past
// a layer index its list too ("a.h.*" -> "a": a ModuleList runs no forward).
func parentModule(m string) string {
	i := strings.LastIndexByte(m, '.')
	if i < 0 {
		return ""
	}
	last, rest := m[i+1:], m[:i]
	if isLayerIndex(last) {
		if j := strings.LastIndexByte(rest, '.'); j >= 0 {
			return rest[:j]
		}
		return ""
	}
	return rest
}

// recordedModule is the module path the agent recorded for the frame's class
// that its memory lies under (the longest), or "".
func recordedModule(c *Node, names Namer, raw string) string {
	if c.Qual == "" {
		return ""
	}
	best := ""
	for _, p := range names.Modules(c.Qual) {
		if len(p) > len(best) && modulePrefix(p, raw) {
			best = p
		}
	}
	return best
}

// modulePrefix says whether module path p is m or one of its ancestors, "*"
// matching any layer index.
func modulePrefix(p, m string) bool {
	ps, ms := strings.Split(p, "."), strings.Split(m, ".")
	if len(ps) > len(ms) {
		return false
	}
	for i := range ps {
		if ps[i] != ms[i] && !(isLayerIndex(ps[i]) && isLayerIndex(ms[i])) {
			return false
		}
	}
	return true
}

func (n *Node) shown() string {
	if n.Qual != "" {
		return n.Qual
	}
	return n.Name
}

// JoinModules is the module path two paths share, a layer index that differs
// read as "*": "m.h.3.attn.c_attn" and "m.h.5.attn.c_proj" give "m.h.*.attn".
func JoinModules(a, b string) string {
	if a == "" || a == b {
		return b
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	var out []string
	for i := 0; i < len(as) && i < len(bs); i++ {
		switch {
		case as[i] == bs[i]:
			out = append(out, as[i])
		case isLayerIndex(as[i]) && isLayerIndex(bs[i]):
			out = append(out, "*")
		default:
			return strings.Join(out, ".")
		}
	}
	return strings.Join(out, ".")
}

func isLayerIndex(s string) bool {
	if s == "*" {
		return true
	}
	_, err := strconv.Atoi(s)
	return err == nil
}
