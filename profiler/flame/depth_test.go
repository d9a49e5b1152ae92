package flame

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// TestDeepPathBounded adds a path deeper than any stack can be (a gap joins
// two): the tree keeps profiler.MaxStackDepth frames below its root, with the
// elided ones named, and its JSON and collapsed text are written (encoding/json
// recursed once per level and overflowed the goroutine stack at 600,000).
func TestDeepPathBounded(t *testing.T) {
	path := make([]profiler.Frame, 600_000)
	for i := range path {
		path[i] = profiler.Frame{File: "a.py", Line: i + 1, Func: "f"}
	}
	tr := NewTree("deep", WeightPeak)
	tr.Add(path, 512, 1)
	tr.Add(path[:10], 256, 1)
	tr.Finish()
	depth, leaf := 0, (*Node)(nil)
	tr.Walk(func(p []*Node, n *Node) {
		if len(p) > depth {
			depth, leaf = len(p), n
		}
	})
	if depth != profiler.MaxStackDepth {
		t.Fatalf("tree depth %d, want %d", depth, profiler.MaxStackDepth)
	}
	if leaf.Line != 600_000 || leaf.Self != 512 {
		t.Errorf("deepest node %+v, want the path's last frame holding 512 bytes", leaf)
	}
	elided := 0
	tr.Walk(func(_ []*Node, n *Node) {
		if n.Name == profiler.ElidedFrame(600_000-profiler.MaxStackDepth+1).Func {
			elided++
		}
	})
	if elided != 1 {
		t.Errorf("%d elided frames, want 1", elided)
	}
	if _, err := json.Marshal(tr); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCollapsed(&buf, tr); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(buf.String(), "\n"); lines != 2 {
		t.Errorf("collapsed: %d lines, want 2", lines)
	}
}

// TestWalkDeepTree walks and finishes a tree deeper than the bound (built by
// hand, as no Add builds it) without recursion.
func TestWalkDeepTree(t *testing.T) {
	tr := NewTree("chain", WeightPeak)
	n := tr.Root
	for i := 0; i < 1_000_000; i++ {
		c := &Node{Name: "f", Value: 1}
		n.Children = append(n.Children, c, &Node{Name: "zero"})
		n = c
	}
	tr.Finish()
	if got := tr.NumNodes(); got != 1_000_001 {
		t.Fatalf("%d nodes, want 1000001 (the zero-weight ones dropped)", got)
	}
}
