package lsp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/lsp/command"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// editor is the fake client's buffer of one open file: it sends each edit as
// an incremental change (or the whole text) and keeps its own copy of the
// text, to say which statement a hint sits on.
type editor struct {
	c       *fakeClient
	u       protocol.DocumentURI
	lines   []string
	version int32
}

func (c *fakeClient) edit(path string) *editor {
	c.t.Helper()
	u := c.open(path)
	return &editor{c: c, u: u, lines: trainerLines(c.t), version: 1}
}

// replace sends lines [start, end) -> repl as one ranged change.
func (e *editor) replace(start, end int, repl []string) {
	text := strings.Join(repl, "\n")
	if len(repl) > 0 {
		text += "\n"
	}
	e.send(map[string]any{"range": protocol.Range{Start: protocol.Position{Line: uint32(start)}, End: protocol.Position{Line: uint32(end)}}, "text": text})
	e.lines = splice(e.lines, start, end, repl)
}

// typeAt inserts text at a column of a line (0-based), as typing does.
func (e *editor) typeAt(line, col int, text string) {
	pos := protocol.Position{Line: uint32(line), Character: uint32(col)}
	e.send(map[string]any{"range": protocol.Range{Start: pos, End: pos}, "text": text})
	e.lines[line] = e.lines[line][:col] + text + e.lines[line][col:]
}

// whole sends the whole text, as a full-sync client does.
func (e *editor) whole(lines []string) {
	e.send(map[string]any{"text": strings.Join(lines, "\n")})
	e.lines = append([]string(nil), lines...)
}

func (e *editor) send(change map[string]any) {
	e.version++
	e.c.conn.Notify(context.Background(), "textDocument/didChange", map[string]any{
		"textDocument": map[string]any{"uri": e.u, "version": e.version}, "contentChanges": []any{change}})
}

// hintsOn is each hinted statement's label, by the statement's text.
func (e *editor) hintsOn() map[string]string {
	out := map[string]string{}
	for _, h := range e.c.hints(e.u) {
		out[strings.TrimSpace(e.lines[h.Position.Line])] = h.Label
		if h.Position.Character != uint32(len(strings.TrimRight(e.lines[h.Position.Line], "\r"))) {
			e.c.t.Errorf("hint at %d:%d, not at the end of %q", h.Position.Line, h.Position.Character, e.lines[h.Position.Line])
		}
	}
	return out
}

// TestHintsFollowEdits drives the real server through an editing session on
// the fixture trainer: hints stay on their statements after lines are
// inserted and deleted above, an edited line says its figures are from before
// the edit, undo brings them back, and a full-sync reorder keeps them too.
func TestHintsFollowEdits(t *testing.T) {
	c := start(t, Config{}, map[string]any{"snapshot": filepath.Join(fixtures, "snapshots/gpt2_train.pickle")})
	c.waitShown("gpt2_train.pickle")
	e := c.edit(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	want := e.hintsOn()
	if !strings.Contains(want[forward], "2.94 GiB at peak") || !strings.Contains(want[step], "at peak") {
		t.Fatalf("hints before any edit: %v", want)
	}
	check := func(what string, edited string) {
		t.Helper()
		got := e.hintsOn()
		for stmt, label := range want {
			if stmt == edited {
				continue
			}
			if got[stmt] != label {
				t.Errorf("%s: %q has hint %q, want %q (all: %v)", what, stmt, got[stmt], label, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d hints, want %d: %v", what, len(got), len(want), got)
		}
	}
	e.replace(0, 0, []string{"# one", "# two"})
	check("two lines inserted at the top", "")
	// Ten more: the recorded line of train_step's first statement (22) is
	// then above its def, where looking upward for the def finds nothing.
	e.replace(0, 0, strings.Split(strings.Repeat("#\n", 9)+"#", "\n"))
	check("ten more lines inserted at the top", "")
	e.lensOn("def train_step(model, opt, ids):", "twelve lines inserted at the top")
	e.replace(0, 10, nil)
	e.replace(0, 2, nil)
	e.replace(2, 3, nil) // import time
	check("lines deleted above", "")

	fwd := lineOf(e.lines, forward) - 1
	col := strings.Index(e.lines[fwd], "labels=ids") + len("labels=ids")
	before := e.lines[fwd]
	e.typeAt(fwd, col, ", use_cache=False")
	got := e.hintsOn()
	edited := strings.TrimSpace(e.lines[fwd])
	if got[edited] != want[forward]+beforeEdit {
		t.Errorf("the edited line's hint %q, want %q", got[edited], want[forward]+beforeEdit)
	}
	check("the line itself edited", forward)
	var hover protocol.Hover
	c.call("textDocument/hover", protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: e.u}, Position: protocol.Position{Line: uint32(fwd), Character: 4}}}, &hover)
	if !strings.Contains(hover.Contents.Value, "2.94 GiB") || !strings.Contains(hover.Contents.Value, "before this line was edited") {
		t.Errorf("hover on the edited line:\n%s", hover.Contents.Value)
	}
	e.replace(fwd, fwd+1, []string{before}) // undo
	check("undo", "")

	// A full-sync client moves train_step to the top of the file.
	from, to := lineOf(e.lines, "def train_step(model, opt, ids):")-1, lineOf(e.lines, "def main():")-1
	fn := append([]string(nil), e.lines[from:to]...)
	moved := splice(append([]string(nil), e.lines...), from, to, nil)
	moved = splice(moved, 1, 1, fn)
	e.whole(moved)
	check("train_step moved to the top", "")
	e.lensOn("def train_step(model, opt, ids):", "train_step moved to the top")
}

// lensOn checks that the "flame graph from here" lens of the function
// defined on the line with text def sits on that line.
func (e *editor) lensOn(def, what string) {
	e.c.t.Helper()
	var lenses []protocol.CodeLens
	e.c.call("textDocument/codeLens", protocol.CodeLensParams{TextDocument: protocol.TextDocumentIdentifier{URI: e.u}}, &lenses)
	want := lineOf(e.lines, def) - 1
	for _, l := range lenses {
		if l.Command != nil && l.Command.Command == command.FlameGraph && int(l.Range.Start.Line) == want {
			return
		}
	}
	e.c.t.Errorf("%s: no flame-graph lens on line %d (%s): %+v", what, want, def, lenses)
}

// TestDiagnosticsFollowEdits: the OOM finding's diagnostic moves with its
// line when lines are inserted above it, and is republished at once.
func TestDiagnosticsFollowEdits(t *testing.T) {
	c := start(t, Config{}, nil)
	path := filepath.Join(fixtures, "trainer/train_gpt2.py")
	e := c.edit(path)
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": filepath.Join(fixtures, "snapshots/oom_batch.pickle")}}}, &sum)
	fwd := uint32(lineOf(e.lines, forward) - 1)
	c.waitDiagnostic(path, fwd)
	e.replace(0, 0, []string{"import sys", "", ""})
	c.waitDiagnostic(path, fwd+3)
}

// TestDiagnosticsAfterSaveAndClose: lines inserted above the OOM's line,
// saved, and the file closed: the diagnostic stays on its statement, now
// placed through the file on disk.
func TestDiagnosticsAfterSaveAndClose(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	local := filepath.Join(dir, "trainer", "train_gpt2.py")
	os.MkdirAll(filepath.Dir(local), 0o755)
	os.WriteFile(local, src, 0o644)
	c := start(t, Config{}, map[string]any{"pathMap": []string{"/workspace/trainer=" + filepath.Dir(local)}})
	e := c.edit(local)
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": filepath.Join(fixtures, "snapshots/oom_batch.pickle")}}}, &sum)
	fwd := uint32(lineOf(e.lines, forward) - 1)
	c.waitDiagnostic(local, fwd)
	e.replace(0, 0, []string{"import sys", "", ""})
	c.waitDiagnostic(local, fwd+3)
	os.WriteFile(local, []byte(strings.Join(e.lines, "\n")), 0o644) // saved
	c.mu.Lock()
	c.diags = map[string][]protocol.Diagnostic{} // what comes after the close
	c.mu.Unlock()
	c.conn.Notify(context.Background(), "textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": e.u}})
	c.waitDiagnostic(local, fwd+3)
}

// waitDiagnostic waits until the first diagnostic of the local file is on line.
func (c *fakeClient) waitDiagnostic(local string, line uint32) {
	c.t.Helper()
	var d []protocol.Diagnostic
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		d = c.diags[string(uri.File(local))]
		c.mu.Unlock()
		if len(d) > 0 && d[0].Range.Start.Line == line {
			return
		}
	}
	c.t.Fatalf("no diagnostic on line %d of %s: %+v", line, local, d)
}
