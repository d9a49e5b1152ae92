package analyze_test

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

// checkTree: every node's value is its own bytes plus its children's, and
// nothing of zero weight is kept.
func checkTree(t *testing.T, tr *flame.Tree) {
	t.Helper()
	bad := 0
	tr.Walk(func(path []*flame.Node, n *flame.Node) {
		var sum int64
		for _, c := range n.Children {
			sum += c.Value
		}
		if (n.Value != n.Self+sum || n.Value <= 0 && len(path) > 0) && bad < 5 {
			bad++
			t.Errorf("node %q (%s:%d): value %d, self %d, children %d", n.Name, n.File, n.Line, n.Value, n.Self, sum)
		}
	})
}

func TestFlameTotals(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			var allocs, allocBytes, active int64
			for _, d := range f.Devices {
				allocs += d.Allocs
				allocBytes += d.AllocBytes
				active += d.ActiveBytes
			}
			var devPeaks int64
			for _, d := range r.Devices {
				devPeaks += d.Peak.Bytes
			}
			for _, c := range []struct {
				w     flame.Weight
				want  int64
				count int64 // -1: not checked
			}{
				{flame.WeightPeak, devPeaks, -1},
				{flame.WeightAlloc, allocBytes, allocs},
				{flame.WeightCurrent, active, f.Devices[0].ActiveBlocks},
			} {
				for _, keep := range []bool{false, true} {
					tr := r.Flame(analyze.FlameOptions{Weight: c.w, KeepWrappers: keep})
					if tr.Weight != c.w || tr.Unit != "bytes" {
						t.Errorf("tree weight %q unit %q", tr.Weight, tr.Unit)
					}
					if tr.Root.Value != c.want {
						t.Errorf("weight %s (keep wrappers %v): root %d, want %d", c.w, keep, tr.Root.Value, c.want)
					}
					if c.count >= 0 && len(f.Devices) == 1 && tr.Root.Count != c.count {
						t.Errorf("weight %s: root counts %d allocations, want %d", c.w, tr.Root.Count, c.count)
					}
					checkTree(t, tr)
				}
			}
			if tr := r.Flame(analyze.FlameOptions{}); tr.Weight != flame.WeightPeak || tr.Root.Value != r.Peak.Bytes {
				t.Errorf("default flame: weight %q, root %d; want peak, %d", tr.Weight, tr.Root.Value, r.Peak.Bytes)
			}
		})
	}
}

var wrapperNames = []string{"_call_impl", "_wrapped_call_impl"}

func TestFlameFoldsWrappers(t *testing.T) {
	r := result(t, "gpt2_train")
	kept := r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak, KeepWrappers: true})
	folded := r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
	count := func(tr *flame.Tree) (wrappers int, user map[string]int64) {
		user = map[string]int64{}
		tr.Walk(func(path []*flame.Node, n *flame.Node) {
			for _, w := range wrapperNames {
				if n.Name == w && len(n.Children) > 0 {
					wrappers++
				}
			}
			if profiler.IsUserFile(n.File) {
				user[fmt.Sprintf("%s:%d %s", filepath.Base(n.File), n.Line, n.Name)] += n.Self
			}
		})
		return
	}
	wk, uk := count(kept)
	wf, uf := count(folded)
	if wk == 0 {
		t.Fatal("the unfolded tree has no nn.Module call wrappers: the test lost its point")
	}
	if wf != 0 {
		t.Errorf("folded tree still has %d wrapper frames", wf)
	}
	if kept.Root.Value != folded.Root.Value || kept.Root.Count != folded.Root.Count {
		t.Errorf("folding changed the totals: %d/%d -> %d/%d", kept.Root.Value, kept.Root.Count, folded.Root.Value, folded.Root.Count)
	}
	if folded.NumNodes() >= kept.NumNodes() {
		t.Errorf("folded tree has %d nodes, unfolded %d", folded.NumNodes(), kept.NumNodes())
	}
	if fmt.Sprint(uk) != fmt.Sprint(uf) {
		t.Errorf("folding changed user frames:\nkept   %v\nfolded %v", uk, uf)
	}
	// The leaves are the same set of allocating frames with the same bytes.
	leaves := func(tr *flame.Tree) map[string]int64 {
		m := map[string]int64{}
		tr.Walk(func(_ []*flame.Node, n *flame.Node) {
			if n.Self > 0 {
				m[fmt.Sprintf("%s:%d %s", n.File, n.Line, n.Name)] += n.Self
			}
		})
		return m
	}
	if fmt.Sprint(leaves(kept)) != fmt.Sprint(leaves(folded)) {
		t.Error("folding changed what the leaves hold")
	}
}

// The flame graph's frames are the top stacks': the largest root-to-leaf path
// of the tree is the top stack's, wrapper frames aside.
func TestFlameMatchesTopStack(t *testing.T) {
	r := result(t, "gpt2_train")
	tr := r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak, KeepWrappers: true})
	top := r.Stacks[0]
	n := tr.Root
	for i, f := range top.Frames {
		var next *flame.Node
		for _, c := range n.Children {
			if c.Name == f.Func && c.File == f.File && c.Line == f.Line {
				next = c
			}
		}
		if next == nil {
			t.Fatalf("frame %d of the top stack (%s %s:%d) is not in the tree", i, f.Func, f.File, f.Line)
		}
		n = next
	}
	if n.Self < top.PeakBytes {
		t.Errorf("top stack's leaf holds %d, the stack %d", n.Self, top.PeakBytes)
	}
}

func TestCollapsedSumsToRoot(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			for _, w := range []flame.Weight{flame.WeightPeak, flame.WeightAlloc} {
				tr := r.Flame(analyze.FlameOptions{Weight: w})
				var b bytes.Buffer
				if err := flame.WriteCollapsed(&b, tr); err != nil {
					t.Fatal(err)
				}
				var sum int64
				lines := 0
				sc := bufio.NewScanner(&b)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					line := sc.Text()
					i := strings.LastIndexByte(line, ' ')
					n, err := strconv.ParseInt(line[i+1:], 10, 64)
					if i < 0 || err != nil || n <= 0 {
						t.Fatalf("bad collapsed line %q", line)
					}
					sum += n
					lines++
				}
				if sum != tr.Root.Value {
					t.Errorf("weight %s: collapsed lines sum to %d, root %d", w, sum, tr.Root.Value)
				}
				if lines == 0 {
					t.Error("no collapsed lines")
				}
			}
		})
	}
}

// The collapsed stacks of gpt2_train (peak weight, wrappers folded).
func TestGoldenCollapsed(t *testing.T) {
	r := result(t, "gpt2_train")
	var b bytes.Buffer
	if err := flame.WriteCollapsed(&b, r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak})); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "gpt2_train.collapsed.golden", b.Bytes())
}

// Each input's top ten sites.
func TestGoldenTopSites(t *testing.T) {
	var b bytes.Buffer
	for _, in := range inputs(t) {
		need(t, in.path)
		r := result(t, in.name)
		fmt.Fprintf(&b, "== %s: peak %d\n", in.name, r.Peak.Bytes)
		for i, s := range r.Sites {
			if i == 10 {
				break
			}
			where := s.Function
			if s.File != "" {
				where = fmt.Sprintf("%s:%d %s", filepath.Base(s.File), s.Line, s.Function)
			}
			fmt.Fprintf(&b, "%-7s %s peak=%d alloc=%d allocs=%d\n", s.Kind, where, s.PeakBytes, s.AllocBytes, s.Allocs)
		}
	}
	golden.Check(t, "top_sites.golden", b.Bytes())
}
