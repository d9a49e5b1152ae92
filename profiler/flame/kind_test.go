package flame

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// Every node of the JSON tree carries the kind the engine decided for its file
// (the shared vectors' kinds; a library's left unsaid), the root and elided
// frames "synthetic", so the renderers have nothing left to derive.
func TestNodesCarryKinds(t *testing.T) {
	raw, err := os.ReadFile("testdata/format_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Kinds [][2]string }
	if err := json.Unmarshal(raw, &v); err != nil || len(v.Kinds) == 0 {
		t.Fatalf("format_vectors.json: %v", err)
	}
	tr := NewTree("kinds", WeightPeak)
	deep := make([]profiler.Frame, profiler.MaxStackDepth+10)
	for i := range deep {
		deep[i] = profiler.Frame{File: "/w/train.py", Line: i + 1, Func: "f"}
	}
	tr.Add(deep, 1, 1) // gains a "[N frames elided]" frame
	want := map[string]string{}
	for i, c := range v.Kinds {
		tr.Add([]profiler.Frame{{File: c[0], Line: i + 1, Func: "f"}}, int64(i+1), 1)
		want[c[0]] = c[1]
	}
	tr.Finish()
	data, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var back Tree
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Root.Kind != profiler.KindSynthetic {
		t.Errorf("root kind %q", back.Root.Kind)
	}
	elided := 0
	back.Walk(func(_ []*Node, n *Node) {
		got := n.Kind
		if got == "" {
			got = profiler.KindLibrary // left unsaid
		}
		if k, ok := want[n.File]; ok && n != back.Root && string(got) != k {
			t.Errorf("%q: kind %q, want %q", n.File, got, k)
		}
		if n.File == "" && n != back.Root {
			elided++
		}
	})
	if elided != 2 { // the elided frame and the vectors' frame without a file
		t.Errorf("%d frames without a file, want 2", elided)
	}
}
