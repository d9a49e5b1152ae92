package analyze_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

// Frames of one function at different lines, under one caller, read apart
// (example_train's loop: "example_train:69", not three "example_train"),
// and Name stays the raw function name on every real snapshot.
func TestFlameLabelsTellLinesApart(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			tr := result(t, in.name).Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
			tr.Walk(func(_ []*flame.Node, n *flame.Node) {
				shown := map[string]*flame.Node{}
				for _, c := range n.Children {
					if strings.Contains(c.Name, " ") && c.Label != "" {
						t.Errorf("synthetic frame %q relabelled %q", c.Name, c.Label)
					}
					l := labelOf(c)
					if o := shown[l]; o != nil && o.Line != c.Line {
						t.Errorf("siblings %s:%d and %s:%d both read %q", o.Name, o.Line, c.Name, c.Line, l)
					}
					shown[l] = c
				}
			})
		})
	}
	tr := result(t, "example_train").Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
	if got := countLabels(tr, "example_train:"); got < 2 {
		t.Errorf("example_train: %d frames read example_train:LINE, want the loop's calls told apart", got)
	}
}

// A method of the user's own class reads Class.method, read from the source
// the snapshot recorded (record_findings.py's Attention).
func TestFlameLabelsClassFromSource(t *testing.T) {
	tr := result(t, "attn_oom").Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
	found := 0
	tr.Walk(func(_ []*flame.Node, n *flame.Node) {
		if n.Qual == "Attention.forward" {
			found++
			if n.Name != "forward" || filepath.Base(n.File) != "record_findings.py" || !strings.HasPrefix(n.Label, "Attention.forward") {
				t.Errorf("node %+v", *n)
			}
		}
		if n.Qual != "" && !strings.HasSuffix(n.Qual, "."+n.Name) {
			t.Errorf("%s:%d: qualified name %q is not a method named %q", n.File, n.Line, n.Qual, n.Name)
		}
	})
	if found == 0 {
		t.Fatal("no frame reads Attention.forward")
	}
}

// Library code whose source is not on this machine reads Class.method from
// the methods the agent's walk recorded (too_big: transformers' GPT-2 on the
// H200); the analysis once seeded them before reading the snapshot's names,
// so no frame got them.
func TestFlameLabelsClassFromAgent(t *testing.T) {
	r, err := analyze.Run(filepath.Join(exampleDir, "oom", "too_big.pickle"), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"activations.py": "NewGELUActivation.forward", "pytorch_utils.py": "Conv1D.forward",
		"normalization.py": "LayerNorm.forward", "sparse.py": "Embedding.forward"}
	seen := map[string]bool{}
	r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak}).Walk(func(_ []*flame.Node, n *flame.Node) {
		if _, err := os.Stat(n.File); err == nil && strings.Contains(n.File, "site-packages") {
			t.Skipf("%s is on this machine: the label could come from the source", n.File)
		}
		base := filepath.Base(n.File)
		if q, ok := want[base]; ok && n.Name == "forward" {
			seen[base] = true
			if n.Qual != q || !strings.HasPrefix(n.Label, q) {
				t.Errorf("%s:%d reads %q (label %q), want %q", base, n.Line, n.Qual, n.Label, q)
			}
		}
		// GPT2Model.forward is wrapped by a decorator in transformers' generic.py:
		// the agent records the lines of the function it wraps.
		for _, m := range []struct {
			first, last int
			qual        string
		}{{238, 243, "GPT2MLP.forward"}, {511, 626, "GPT2Model.forward"}} {
			if base == "modeling_gpt2.py" && n.Name == "forward" && n.Line >= m.first && n.Line <= m.last {
				seen[m.qual] = true
				if n.Qual != m.qual {
					t.Errorf("modeling_gpt2.py:%d reads %q, want %s", n.Line, n.Qual, m.qual)
				}
			}
		}
	})
	if len(seen) != len(want)+2 {
		t.Errorf("frames seen in %v of %v, GPT2MLP.forward and GPT2Model.forward", seen, want)
	}
}

// Forward frames whose memory the agent named carry the module they run,
// layers read as "*"; callers of the model do not. too_big is GPT-2 from
// transformers, whose lines are known: GPT2Model.forward's layer loop (608),
// GPT2Block.forward (274-307), GPT2MLP.forward (239-242) and
// GPT2Attention.forward (185-223).
func TestFlameLabelsModules(t *testing.T) {
	r, err := analyze.Run(filepath.Join(exampleDir, "oom", "too_big.pickle"), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
	want := map[int]string{608: "model.transformer", 274: "model.transformer.h.*", 305: "model.transformer.h.*",
		282: "model.transformer.h.*", 307: "model.transformer.h.*", 239: "model.transformer.h.*.mlp",
		240: "model.transformer.h.*.mlp", 185: "model.transformer.h.*.attn", 211: "model.transformer.h.*.attn"}
	seen := map[int]bool{}
	tr.Walk(func(_ []*flame.Node, n *flame.Node) {
		if n.Module != "" {
			if n.Name != "forward" {
				t.Errorf("%s:%d %s carries module %q", n.File, n.Line, n.Name, n.Module)
			}
			if !strings.HasSuffix(n.Label, " ("+n.Module+")") {
				t.Errorf("label %q does not name module %q", n.Label, n.Module)
			}
		}
		if m, ok := want[n.Line]; ok && filepath.Base(n.File) == "modeling_gpt2.py" && n.Name == "forward" {
			seen[n.Line] = true
			if n.Module != m {
				t.Errorf("modeling_gpt2.py:%d runs %q, want %q", n.Line, n.Module, m)
			}
		}
	})
	if len(seen) != len(want) {
		t.Errorf("found lines %v of %v", seen, want)
	}
}

func labelOf(n *flame.Node) string {
	if n.Label != "" {
		return n.Label
	}
	return n.Name
}

func countLabels(tr *flame.Tree, prefix string) (k int) {
	tr.Walk(func(_ []*flame.Node, n *flame.Node) {
		if strings.HasPrefix(n.Label, prefix) {
			k++
		}
	})
	return k
}
