package lsp

import (
	"testing"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

// TestDeepStack shows a 600,000-frame stack and asks for its flame graph,
// whole and from a function: writing the tree's JSON overflowed the server's
// goroutine stack (a fatal error). The tree is bounded.
func TestDeepStack(t *testing.T) {
	snap := hostile.WriteDeepStack(t, 600_000)
	c := start(t, Config{}, map[string]any{"snapshot": snap})
	c.waitShown("deep.pickle")
	for _, args := range []map[string]string{{}, {"function": "f", "file": "a.py"}} {
		var tr flame.Tree
		c.call("workspace/executeCommand", map[string]any{"command": command.FlameGraph, "arguments": []any{withTree(args)}}, &tr)
		depth := 0
		tr.Walk(func(p []*flame.Node, _ *flame.Node) { depth = max(depth, len(p)) })
		want := profiler.MaxStackDepth
		if args["function"] != "" {
			want-- // rooted at the outermost frame
		}
		if depth != want || tr.Root == nil || tr.Root.Value != 512 {
			t.Errorf("flame graph %v: depth %d (want %d), root %+v", args, depth, want, tr.Root)
		}
	}
}

// withTree asks flameGraph for the tree (the extension's webview) rather than a page.
func withTree(args map[string]string) map[string]string {
	out := map[string]string{"format": "tree"}
	for k, v := range args {
		out[k] = v
	}
	return out
}
