package analyze_test

import (
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

// Forward frames whose memory the agent named carry its module path; layers
// read as "*"; callers of the model do not.
func TestFlameLabelsModules(t *testing.T) {
	r, err := analyze.Run(filepath.Join(exampleDir, "oom", "too_big.pickle"), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
	byModule := map[string]int64{}
	tr.Walk(func(_ []*flame.Node, n *flame.Node) {
		if n.Module == "" {
			return
		}
		byModule[n.Module] += n.Value
		if n.Name != "forward" {
			t.Errorf("%s:%d %s carries module %q", n.File, n.Line, n.Name, n.Module)
		}
		if !strings.HasSuffix(n.Label, " ("+n.Module+")") {
			t.Errorf("label %q does not name module %q", n.Label, n.Module)
		}
	})
	for _, m := range []string{"model.transformer.h.*", "model.transformer.h.*.mlp", "model.transformer.h.*.attn"} {
		if byModule[m] == 0 {
			t.Errorf("no forward frame labelled %q (have %v)", m, byModule)
		}
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
