package lsp

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// TestCalledFrom: a hover's stack starts below the hovered line and keeps the
// first and the innermost frame of a long call chain.
func TestCalledFrom(t *testing.T) {
	fr := func(names ...string) []profiler.Frame {
		var out []profiler.Frame
		for i, n := range names {
			out = append(out, profiler.Frame{Func: n, File: n + ".py", Line: i + 1})
		}
		return out
	}
	str := func(fs []profiler.Frame) string {
		var s []string
		for _, f := range fs {
			s = append(s, f.Func)
		}
		return strings.Join(s, ">")
	}
	for _, c := range []struct {
		frames []profiler.Frame
		file   string
		line   int
		want   string
	}{
		{fr("main", "step", "fwd", "mlp", "gelu", "act"), "step.py", 2, "fwd>" + elided + ">act"},
		{fr("main", "step", "fwd", "mlp"), "step.py", 2, "fwd>mlp"},
		{fr("main", "step", "fwd", "mlp", "act"), "step.py", 2, "fwd>mlp>act"},
		{fr("main", "step"), "step.py", 2, "step"},                         // the line allocates itself
		{fr("a", "b", "c", "d", "e"), "other.py", 9, "a>" + elided + ">e"}, // the line is not on the stack
	} {
		if got := str(calledFrom(c.frames, c.file, c.line)); got != c.want {
			t.Errorf("calledFrom(%s, %s:%d) = %s, want %s", str(c.frames), c.file, c.line, got, c.want)
		}
	}
}

// TestEscapeMD: markup characters are escaped, but an underscore inside a
// word stays (it cannot be emphasis; Neovim showed modeling\_gpt2.py).
func TestEscapeMD(t *testing.T) {
	for in, want := range map[string]string{
		"modeling_gpt2.py:682": "modeling_gpt2.py:682",
		"_private":             `\_private`,
		"tail_":                `tail\_`,
		"a*b[c]`d`|e":          "a\\*b\\[c\\]\\`d\\`\\|e",
		`back\slash`:           `back\\slash`,
		"snake__case":          `snake\_\_case`, // a run of them could be emphasis
	} {
		if got := escapeMD(in); got != want {
			t.Errorf("escapeMD(%q) = %q, want %q", in, got, want)
		}
	}
}
