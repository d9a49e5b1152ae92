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
			c.Module = frameModule(c, names)
		}
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

// frameModule is the module a forward frame runs: the path its memory
// shares, narrowed to the instance of the frame's class where the agent said
// which paths those are (the memory under GPT2Model.forward's layer loop is
// all in "m.transformer.h.*", but the frame is "m.transformer"'s).
func frameModule(c *Node, names Namer) string {
	if c.Name != "forward" || c.Module == "" {
		return "" // a module path names a module's forward, not its callers
	}
	if c.Qual == "" {
		return c.Module
	}
	paths := names.Modules(c.Qual)
	if len(paths) == 0 {
		return c.Module
	}
	best := ""
	for _, p := range paths {
		if len(p) > len(best) && modulePrefix(p, c.Module) {
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
