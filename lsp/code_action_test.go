package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/lsp/command"
	"go.lsp.dev/protocol"
)

// TestCodeActionOpensFitPlans: on the line of oom_batch's failure a quick
// fix names the plan that fits; running it writes the plans' page and asks
// the editor to open it. Another line has no action.
func TestCodeActionOpensFitPlans(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the plans' page
	c := start(t, Config{}, nil)
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": filepath.Join(fixtures, "snapshots/oom_batch.pickle")}}}, &sum)
	u := c.open(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	ask := func(line int) []protocol.CodeAction {
		var actions []protocol.CodeAction
		c.call("textDocument/codeAction", map[string]any{"textDocument": map[string]string{"uri": string(u)},
			"range": lineRange(line), "context": map[string]any{"diagnostics": []any{}}}, &actions)
		return actions
	}
	if a := ask(5); len(a) != 0 {
		t.Errorf("actions on a line that did not fail: %+v", a)
	}
	actions := ask(22)
	if len(actions) != 1 || !strings.Contains(actions[0].Title, "micro-batch") || actions[0].Command == nil ||
		actions[0].Command.Command != command.ShowFitPlans {
		t.Fatalf("actions on the failing line: %+v", actions)
	}
	var page command.FitPlansPage
	c.call("workspace/executeCommand", map[string]any{"command": actions[0].Command.Command,
		"arguments": actions[0].Command.Arguments}, &page)
	text, err := os.ReadFile(page.Path)
	if err != nil || !page.Opened || page.Plans == 0 {
		t.Fatalf("page %+v: %v", page, err)
	}
	for _, want := range []string{"# What fits: train_gpt2.py:22", "| plan |", "micro-batch", "vramscope fit"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("page lacks %q:\n%s", want, text)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.shown) == 0 || c.shown[len(c.shown)-1]["uri"] != page.URI {
		t.Errorf("not opened in the editor: %v", c.shown)
	}
}
