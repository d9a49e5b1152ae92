package lsp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/lsp/command"
)

// TestFlamePage: "flame graph from here" in an editor without the
// extension's webview writes the linked report and asks the client to open
// it in the browser; a client without showDocument gets its path, in the
// answer and a message.
func TestFlamePage(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	snap := filepath.Join(fixtures, "snapshots/gpt2_train.pickle")
	args := []any{map[string]any{"file": "/workspace/trainer/train_gpt2.py", "function": "train_step"}}
	for _, c := range []struct {
		name string
		caps map[string]any
	}{{"showDocument", vscodeCaps}, {"bare", map[string]any{}}} {
		cl := startWith(t, Config{}, map[string]any{"snapshot": snap}, c.caps)
		cl.waitShown("gpt2_train.pickle")
		var page command.FlamePage
		cl.call("workspace/executeCommand", map[string]any{"command": command.FlameGraph, "arguments": args}, &page)
		b, err := os.ReadFile(page.Path)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		html := string(b)
		if !strings.Contains(html, "train_step") || !strings.Contains(html, "VramscopeReport") || !strings.Contains(html, filepath.Join(fixtures, "trainer/train_gpt2.py")) {
			t.Errorf("%s: %s is not the report rooted at train_step with local paths (%d bytes)", c.name, page.Path, len(b))
		}
		if c.name == "bare" {
			// The client handles notifications on their own goroutines: the
			// message may land after the answer.
			cl.waitFor("the message", func() bool { return len(cl.msgs) > 0 })
		}
		cl.mu.Lock()
		switch c.name {
		case "showDocument":
			if !page.Opened || len(cl.shown) != 1 || cl.shown[0]["uri"] != page.URI || cl.shown[0]["external"] != true {
				t.Errorf("showDocument: opened %v, asked %v", page.Opened, cl.shown)
			}
		case "bare":
			if page.Opened || len(cl.shown) != 0 || len(cl.msgs) != 1 || !strings.Contains(cl.msgs[0], page.Path) {
				t.Errorf("bare client: opened %v, shown %v, messages %v", page.Opened, cl.shown, cl.msgs)
			}
		}
		cl.mu.Unlock()
	}
}

// TestCommandArguments: Lua's {} (an empty array) is no argument; a wrong
// shape gets an error naming the argument and the shape expected.
func TestCommandArguments(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c := start(t, Config{}, map[string]any{"snapshot": filepath.Join(fixtures, "snapshots/gpt2_train.pickle")})
	c.waitShown("gpt2_train.pickle")
	var page command.FlamePage
	c.call("workspace/executeCommand", map[string]any{"command": command.FlameGraph, "arguments": []any{[]any{}}}, &page)
	if page.Path == "" {
		t.Errorf("flameGraph with arguments [[]]: %+v", page)
	}
	for _, bad := range []struct {
		command string
		args    []any
		want    []string
	}{
		{command.Attach, []any{map[string]any{"pid": "12"}}, []string{`"pid" must be a number`, `{"pid": 1234}`}},
		{command.OpenSnapshot, []any{"x.pickle"}, []string{"argument 1 must be an object", `{"path": "snapshot.pickle"}`}},
		{command.FlameGraph, []any{map[string]any{"format": "svg"}}, []string{`unknown format "svg"`}},
		{command.CompareSnapshots, []any{map[string]any{}, map[string]any{}}, []string{"takes one argument", "got 2"}},
		{"vramscope.nope", nil, []string{`unknown command "vramscope.nope"`}},
	} {
		err := c.conn.Call(context.Background(), "workspace/executeCommand", map[string]any{"command": bad.command, "arguments": bad.args}, nil)
		for _, w := range bad.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: error %v, want one with %q", bad.command, bad.args, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "Go value") {
			t.Errorf("%s: Go internals in the error: %v", bad.command, err)
		}
	}
}

// TestRelativeSettings: a relative snapshot setting and command path are
// inside the first workspace folder (the fixtures), not the server's working
// directory (lsp/ under go test).
func TestRelativeSettings(t *testing.T) {
	c := start(t, Config{}, map[string]any{"vramscope": map[string]any{"snapshot": "snapshots/gpt2_train.pickle"}})
	c.waitShown(filepath.Join(fixtures, "snapshots/gpt2_train.pickle"))
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": "snapshots/oom_batch.pickle"}}}, &sum)
	if sum.Path != filepath.Join(fixtures, "snapshots/oom_batch.pickle") {
		t.Errorf("openSnapshot of a relative path opened %q", sum.Path)
	}
}
