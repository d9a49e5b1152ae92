// Package flame is the one flame-graph core every front end uses: a tree of
// frames from root (outermost caller) to leaf (the allocating frame), weighted by
// bytes. The CLI's HTML page, the VS Code webview and the notebook widget all
// render the JSON this package writes, with the same JavaScript (web/flame.js).
package flame

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// Weight selects which figure a tree is weighted by.
type Weight string

// The weights a flame graph can show.
const (
	WeightPeak    Weight = "peak"    // bytes live at the peak
	WeightAlloc   Weight = "alloc"   // bytes allocated over the whole trace
	WeightCurrent Weight = "current" // bytes alive when the snapshot was taken
)

// ParseWeight validates a weight name.
func ParseWeight(s string) (Weight, bool) {
	switch Weight(s) {
	case WeightPeak, WeightAlloc, WeightCurrent:
		return Weight(s), true
	}
	return "", false
}

// Node is one frame in the tree. V is the node's total (itself and everything
// below), S the part allocated directly at this frame. JSON field names are short
// because trees reach 100k nodes.
type Node struct {
	Name string `json:"n"`
	File string `json:"f,omitempty"`
	Line int    `json:"l,omitempty"`
	// Kind is how the frame reads (profiler.KindOfFile), decided here once
	// so that every renderer draws the same: "user", "synthetic", or empty
	// for a library's frame, the commonest kind, left unsaid. The 100k-frame
	// demo page (profiler/flame/internal/demo) grew 14.8% when every node said its kind, 6.0%
	// this way (9,595,216 -> 10,170,756 bytes; 2026-12-02, the dev machine).
	Kind     profiler.FrameKind `json:"t,omitempty"`
	Value    int64              `json:"v"`
	Self     int64              `json:"s,omitempty"`
	Count    int64              `json:"k,omitempty"` // allocations through this node
	Children []*Node            `json:"c,omitempty"`
	// What people read (labels.go): the label drawn, where it is not Name
	// ("GPT2Attention.forward (model.transformer.h.*.attn)", "train:31");
	// the recovered "Class.method"; the module path of the memory below.
	Label  string `json:"d,omitempty"`
	Qual   string `json:"q,omitempty"`
	Module string `json:"m,omitempty"`

	index map[profiler.Frame]*Node
}

// Tree is a flame graph with what the front ends need to label it.
type Tree struct {
	Title  string `json:"title"`
	Weight Weight `json:"weight"`
	Unit   string `json:"unit"` // always "bytes" today
	Root   *Node  `json:"root"`
}

// NewTree returns an empty tree whose root is named after the snapshot.
func NewTree(title string, w Weight) *Tree {
	return &Tree{Title: title, Weight: w, Unit: "bytes", Root: &Node{Name: "all", Kind: profiler.KindSynthetic}}
}

// Add records value bytes (and count allocations) at a path given root first.
// A path deeper than profiler.MaxStackDepth (a gap's path joins two stacks)
// loses its middle frames to one "[N frames elided]" frame, so that the tree,
// its JSON and everything that walks it stay bounded in depth.
func (t *Tree) Add(path []profiler.Frame, value, count int64) {
	if value == 0 && count == 0 {
		return
	}
	n := t.Root
	n.Value += value
	n.Count += count
	for _, f := range t.boundedPath(path) {
		n = n.child(f)
		n.Value += value
		n.Count += count
	}
	n.Self += value
}

// boundedPath is path, or, deeper than profiler.MaxStackDepth, its two ends
// around one "[N frames elided]" frame.
func (t *Tree) boundedPath(path []profiler.Frame) []profiler.Frame {
	if len(path) <= profiler.MaxStackDepth {
		return path
	}
	keep := profiler.MaxStackDepth / 2
	outer, inner := path[:keep], path[len(path)-(profiler.MaxStackDepth-keep-1):]
	out := make([]profiler.Frame, 0, profiler.MaxStackDepth)
	out = append(out, outer...)
	out = append(out, profiler.ElidedFrame(len(path)-len(outer)-len(inner)))
	return append(out, inner...)
}

func (n *Node) child(f profiler.Frame) *Node {
	if n.index == nil {
		n.index = map[profiler.Frame]*Node{}
	}
	c := n.index[f]
	if c == nil {
		c = &Node{Name: f.Func, File: f.File, Line: f.Line, Kind: NodeKind(f.File)}
		n.index[f] = c
		n.Children = append(n.Children, c)
	}
	return c
}

// NodeKind is Node.Kind of a frame in file: its profiler.KindOfFile, empty
// for a library's (analyze's moment frames say it the same way).
func NodeKind(file string) profiler.FrameKind {
	if k := profiler.KindOfFile(file); k != profiler.KindLibrary {
		return k
	}
	return ""
}

// Finish drops zero-weight nodes and orders children by weight, largest first,
// so output is deterministic.
func (t *Tree) Finish() {
	stack := []*Node{t.Root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n.index = nil
		kept := n.Children[:0]
		for _, c := range n.Children {
			if c.Value > 0 {
				kept = append(kept, c)
			}
		}
		clear(n.Children[len(kept):])
		n.Children = kept
		sortChildren(kept)
		stack = append(stack, kept...)
	}
}

func sortChildren(kept []*Node) {
	sort.SliceStable(kept, func(i, j int) bool {
		if kept[i].Value != kept[j].Value {
			return kept[i].Value > kept[j].Value
		}
		if kept[i].File != kept[j].File {
			return kept[i].File < kept[j].File
		}
		if kept[i].Line != kept[j].Line {
			return kept[i].Line < kept[j].Line
		}
		return kept[i].Name < kept[j].Name
	})
}

// Walk visits every node root first (children in order) with its path of
// ancestors. It keeps its own stack rather than recursing, so that no tree is
// too deep for it; fn must not keep path.
func (t *Tree) Walk(fn func(path []*Node, n *Node)) {
	type visit struct {
		n     *Node
		depth int // len(path) when n is visited
	}
	var path []*Node
	stack := []visit{{t.Root, 0}}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		path = path[:v.depth]
		fn(path, v.n)
		path = append(path, v.n)
		for i := len(v.n.Children) - 1; i >= 0; i-- {
			stack = append(stack, visit{v.n.Children[i], v.depth + 1})
		}
	}
}

// NumNodes counts the nodes, root included.
func (t *Tree) NumNodes() int {
	k := 0
	t.Walk(func([]*Node, *Node) { k++ })
	return k
}
