package flame

import (
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

func TestJoinModules(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"", "m.h.3.attn", "m.h.3.attn"},
		{"m.h.3.attn.c_attn", "m.h.5.attn.c_proj", "m.h.*.attn"},
		{"m.h.*.attn", "m.h.7.mlp", "m.h.*"},
		{"m.wte", "m.h.1", "m"},
		{"a.b", "c.d", ""},
	} {
		if got := JoinModules(c.a, c.b); got != c.want {
			t.Errorf("JoinModules(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// With the agent's methods, a forward frame reads its own module, not the
// deeper one all its memory happens to share.
func TestLabelWithRecordedMethods(t *testing.T) {
	var q profiler.Qualnames
	q.Seed([]profiler.Method{
		{File: "/r/gpt2.py", First: 600, Last: 700, Qual: "GPT2Model.forward", Modules: []string{"m.transformer"}},
		{File: "/r/gpt2.py", First: 300, Last: 320, Qual: "GPT2Block.forward", Modules: []string{"m.transformer.h.*"}},
	}, func(f string) string { return "/local" + f })
	tr := NewTree("t", WeightPeak)
	path := []profiler.Frame{
		{File: "/work/train.py", Line: 31, Func: "train"},
		{File: "/local/r/gpt2.py", Line: 608, Func: "forward"},
		{File: "/local/r/gpt2.py", Line: 305, Func: "forward"},
	}
	tr.AddModule(path, 100, 1, "m.transformer.h.3.mlp.c_fc")
	tr.AddModule(path, 50, 1, "m.transformer.h.4.attn.c_attn")
	other := append([]profiler.Frame{{File: "/work/train.py", Line: 35, Func: "train"}}, path[1:]...)
	tr.Add(other, 10, 1)
	tr.Finish()
	tr.Label(&q)
	loop := tr.Root.Children[0]
	model := loop.Children[0]
	block := model.Children[0]
	for _, c := range []struct {
		n    *Node
		want string
	}{
		{loop, "train:31"},
		{tr.Root.Children[1], "train:35"},
		{model, "GPT2Model.forward (m.transformer)"},
		{block, "GPT2Block.forward (m.transformer.h.*)"},
	} {
		if c.n.Label != c.want {
			t.Errorf("label %q, want %q", c.n.Label, c.want)
		}
	}
	if model.Name != "forward" || model.Qual != "GPT2Model.forward" {
		t.Errorf("raw name %q, qual %q", model.Name, model.Qual)
	}
}

func TestParentModule(t *testing.T) {
	for m, want := range map[string]string{"a.h.*.mlp": "a.h.*", "a.h.*": "a", "a.h.3": "a", "a.b": "a", "a": "", "h.*": ""} {
		if got := parentModule(m); got != want {
			t.Errorf("parentModule(%q) = %q, want %q", m, got, want)
		}
	}
}
