package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/lsp/command"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

var fixtures, _ = filepath.Abs("../../shared/fixtures")

// fakeClient is an editor on the other end of a pipe: it sends requests and
// records what the server pushes (diagnostics, messages, refresh requests).
type fakeClient struct {
	t     *testing.T
	srv   *Server
	conn  *jsonrpc2.Conn
	mu    sync.Mutex
	diags map[string][]protocol.Diagnostic
	msgs  []string
	asked map[string]int
	// What the server sent beyond the above: $/progress values, window/showDocument params.
	progress []map[string]any
	shown    []map[string]any
}

func (c *fakeClient) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch req.Method {
	case "textDocument/publishDiagnostics":
		var p protocol.PublishDiagnosticsParams
		json.Unmarshal(*req.Params, &p)
		c.diags[string(p.URI)] = p.Diagnostics
	case "window/showMessage":
		var p struct{ Message string }
		json.Unmarshal(*req.Params, &p)
		c.msgs = append(c.msgs, p.Message)
	case "$/progress", "window/showDocument":
		var p map[string]any
		json.Unmarshal(*req.Params, &p)
		if req.Method == "$/progress" {
			c.progress = append(c.progress, p["value"].(map[string]any))
		} else {
			c.shown = append(c.shown, p)
		}
		c.asked[req.Method]++
		if !req.Notif {
			conn.Reply(ctx, req.ID, map[string]bool{"success": true})
			return
		}
	default:
		c.asked[req.Method]++
	}
	if !req.Notif {
		conn.Reply(ctx, req.ID, nil)
	}
}

// vscodeCaps are the client capabilities the server acts on, as VS Code
// advertises them.
var vscodeCaps = map[string]any{
	"workspace": map[string]any{"codeLens": map[string]any{"refreshSupport": true}, "inlayHint": map[string]any{"refreshSupport": true}},
	"window":    map[string]any{"workDoneProgress": true, "showDocument": map[string]any{"support": true}},
}

// start runs a server on a pipe and initializes it with the fixtures as the
// workspace, opts as initializationOptions and VS Code's capabilities.
func start(t *testing.T, cfg Config, opts map[string]any) *fakeClient {
	t.Helper()
	return startWith(t, cfg, opts, vscodeCaps)
}

// startWith is start for a client with the given capabilities.
func startWith(t *testing.T, cfg Config, opts, caps map[string]any) *fakeClient {
	t.Helper()
	if cfg.Daemon == "" {
		cfg.Daemon = "off"
	}
	a, b := net.Pipe()
	srv := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, a); close(done) }()
	c := &fakeClient{t: t, srv: srv, diags: map[string][]protocol.Diagnostic{}, asked: map[string]int{}}
	// Async, as an editor is: a client that answered the server inline could
	// block its reader on a write while the server blocks on one to it (net.Pipe
	// has no buffer).
	c.conn = jsonrpc2.NewConn(ctx, jsonrpc2.NewBufferedStream(b, jsonrpc2.VSCodeObjectCodec{}), jsonrpc2.AsyncHandler(c))
	t.Cleanup(func() { c.conn.Close(); cancel(); <-done })
	var res initializeResult
	c.call("initialize", map[string]any{"processId": os.Getpid(), "rootUri": uri.File(fixtures),
		"workspaceFolders":      []any{map[string]string{"uri": string(uri.File(fixtures)), "name": "fixtures"}},
		"initializationOptions": opts, "capabilities": caps}, &res)
	if res.Capabilities.InlayHintProvider == nil || res.Capabilities.CodeLensProvider == nil {
		t.Fatalf("capabilities: %+v", res.Capabilities)
	}
	c.conn.Notify(context.Background(), "initialized", map[string]any{})
	return c
}

func (c *fakeClient) call(method string, params, result any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.conn.Call(ctx, method, params, result); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *fakeClient) open(path string) protocol.DocumentURI {
	text, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	u := uri.File(path)
	c.conn.Notify(context.Background(), "textDocument/didOpen", protocol.DidOpenTextDocumentParams{
		TextDocument: protocol.TextDocumentItem{URI: u, LanguageID: "python", Version: 1, Text: string(text)}})
	return u
}

// waitShown waits until the server shows a snapshot (it analyses in the background).
func (c *fakeClient) waitShown(path string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := c.srv.shown(); l != nil && strings.HasSuffix(l.path, path) {
			return
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			msgs := fmt.Sprint(c.msgs)
			c.mu.Unlock()
			c.t.Fatalf("snapshot %s never shown; messages %s", path, msgs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *fakeClient) hints(u protocol.DocumentURI) []InlayHint {
	var hints []InlayHint
	c.call("textDocument/inlayHint", InlayHintParams{TextDocument: protocol.TextDocumentIdentifier{URI: u},
		Range: protocol.Range{End: protocol.Position{Line: 100000}}}, &hints)
	return hints
}

// normalize makes output independent of where the fixtures are checked out.
func normalize(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, string(uri.File(fixtures)), "file://$FIXTURES"), fixtures, "$FIXTURES")
}

func render(v any) []byte {
	b, _ := json.MarshalIndent(v, "", " ")
	return []byte(normalize(string(b)) + "\n")
}

// TestOfflineOnTheFixtures: the recorded /workspace/trainer/train_gpt2.py lights
// up the local fixtures/trainer/train_gpt2.py; hints, hovers, lenses and
// diagnostics against golden files.
func TestOfflineOnTheFixtures(t *testing.T) {
	c := start(t, Config{}, map[string]any{"snapshot": filepath.Join(fixtures, "snapshots/gpt2_train.pickle")})
	c.waitShown("gpt2_train.pickle")
	u := c.open(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	hints := c.hints(u)
	if len(hints) == 0 {
		t.Fatal("no hints on train_gpt2.py")
	}
	var on22 string
	for _, h := range hints {
		if h.Position.Line == 21 {
			on22 = h.Label
		}
	}
	if !strings.Contains(on22, "at peak") || !strings.Contains(on22, "%") || !strings.Contains(on22, "alloc") {
		t.Errorf("hint on line 22 = %q", on22)
	}
	golden.Check(t, "gpt2_train.hints.golden", render(hints))

	var hover protocol.Hover
	c.call("textDocument/hover", protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: protocol.Position{Line: 21, Character: 4}}}, &hover)
	if !strings.Contains(hover.Contents.Value, "live at peak") || !strings.Contains(hover.Contents.Value, "](file://") {
		t.Errorf("hover:\n%s", hover.Contents.Value)
	}
	golden.Check(t, "gpt2_train.hover22.golden", []byte(normalize(hover.Contents.Value)+"\n"))

	var lenses []protocol.CodeLens
	c.call("textDocument/codeLens", protocol.CodeLensParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &lenses)
	if len(lenses) == 0 {
		t.Fatal("no code lenses")
	}
	golden.Check(t, "gpt2_train.lenses.golden", render(lenses))

	// A file the snapshot does not know: nothing, and no message.
	other := c.open(filepath.Join(fixtures, "trainer/common.py"))
	if h := c.hints(other); len(h) != 0 {
		t.Errorf("hints on common.py: %v", h)
	}
	c.mu.Lock() // the client's handler records what the server sends on goroutines of its own
	defer c.mu.Unlock()
	if len(c.msgs) != 0 {
		t.Errorf("messages: %v", c.msgs)
	}
	if c.asked[methodInlayHintRefresh] == 0 {
		t.Error("no inlay-hint refresh after the snapshot was shown")
	}
}

func TestDiagnosticsForTheOOM(t *testing.T) {
	c := start(t, Config{}, nil)
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": filepath.Join(fixtures, "snapshots/oom_batch.pickle")}}}, &sum)
	if sum.PeakBytes == 0 || sum.Findings == 0 {
		t.Fatalf("open: %+v", sum)
	}
	deadline := time.Now().Add(5 * time.Second)
	local := string(uri.File(filepath.Join(fixtures, "trainer/train_gpt2.py")))
	for {
		c.mu.Lock()
		d := c.diags[local]
		c.mu.Unlock()
		if len(d) > 0 {
			if d[0].Severity != protocol.DiagnosticSeverityError || d[0].Range.Start.Line != 21 || d[0].Code != "oom" {
				t.Errorf("diagnostic %+v", d[0])
			}
			golden.Check(t, "oom_batch.diagnostics.golden", render(d))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no diagnostics on %s: %v", local, c.diags)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Showing a healthy snapshot clears them.
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": filepath.Join(fixtures, "snapshots/gpt2_train.pickle")}}}, &sum)
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.diags[local]) != 0 {
		t.Errorf("diagnostics stay after a healthy snapshot: %v", c.diags[local])
	}
}

// TestDecodedOnce: hints, hovers, lenses and reopening never decode again.
func TestDecodedOnce(t *testing.T) {
	snap := filepath.Join(fixtures, "snapshots/llama_lora_gc.pickle")
	c := start(t, Config{}, map[string]any{"snapshot": snap})
	c.waitShown("llama_lora_gc.pickle")
	u := c.open(filepath.Join(fixtures, "trainer/train_lora.py"))
	for i := 0; i < 5; i++ {
		if len(c.hints(u)) == 0 {
			t.Fatal("no hints on train_lora.py")
		}
	}
	var sum command.Summary
	for i := 0; i < 3; i++ {
		c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot, "arguments": []any{map[string]string{"path": snap}}}, &sum)
	}
	if c.srv.snaps.runs != 1 {
		t.Errorf("%d analyses of one snapshot", c.srv.snaps.runs)
	}
}

// TestBadInput: a malformed request gets an error and the server goes on; a
// snapshot that fails to decode is one message naming the file.
func TestBadInput(t *testing.T) {
	c := start(t, Config{}, nil)
	err := c.conn.Call(context.Background(), "textDocument/hover", json.RawMessage(`"not an object"`), nil)
	if err == nil || !strings.Contains(err.Error(), "invalid params") {
		t.Errorf("malformed hover: %v", err)
	}
	err = c.conn.Call(context.Background(), "textDocument/noSuchMethod", nil, nil)
	if err == nil {
		t.Error("unknown method answered")
	}
	bad := filepath.Join(t.TempDir(), "notes.pickle")
	os.WriteFile(bad, []byte("not a pickle"), 0o644)
	err = c.conn.Call(context.Background(), "workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": bad}}}, nil)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad snapshot: %v", err)
	}
	// The window/showMessage notification and the error reply travel apart:
	// wait for the message rather than read it as soon as the reply is in.
	var msgs string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		msgs = fmt.Sprint(c.msgs)
		c.mu.Unlock()
		if strings.Contains(msgs, bad) {
			break
		}
	}
	if !strings.Contains(msgs, bad) {
		t.Errorf("no message naming %s in 10 s: %s", bad, msgs)
	}
	var hints []InlayHint
	c.call("textDocument/inlayHint", InlayHintParams{TextDocument: protocol.TextDocumentIdentifier{URI: "file:///nowhere.py"}}, &hints)
	if len(hints) != 0 {
		t.Errorf("hints without a snapshot: %v", hints)
	}
}

// TestPathMapSetting: an explicit rule maps the recorded prefix to a folder
// outside the workspace.
func TestPathMapSetting(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	local := filepath.Join(dir, "mine", "train_gpt2.py")
	os.MkdirAll(filepath.Dir(local), 0o755)
	os.WriteFile(local, src, 0o644)
	c := start(t, Config{}, map[string]any{"snapshot": filepath.Join(fixtures, "snapshots/gpt2_train.pickle"),
		"pathMap": []string{"/workspace/trainer=" + filepath.Dir(local)}, "hintThreshold": 0.2})
	c.waitShown("gpt2_train.pickle")
	hints := c.hints(c.open(local))
	if len(hints) == 0 {
		t.Fatal("the pathMap rule did not light up the file")
	}
	for _, h := range hints {
		var pct float64
		fmt.Sscanf(strings.Split(h.Label, " · ")[1], "%f%%", &pct)
		if pct < 19.5 {
			t.Errorf("hint below the 20%% threshold: %q", h.Label)
		}
	}
	lines := []int{}
	for _, h := range hints {
		lines = append(lines, int(h.Position.Line))
	}
	if !sort.IntsAreSorted(lines) {
		t.Errorf("hints out of order: %v", lines)
	}
}

// TestDiagnosticForAnOOMInGeneration: the OOM diagnostic on the generating
// line says what the KV cache held and which batch and length fit
// (snaptool.py's kv_oom, an OOM the agent named between sampled windows).
func TestDiagnosticForAnOOMInGeneration(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		reftool.Missing(t, "no python3")
	}
	snap := filepath.Join(t.TempDir(), "kv_oom.pickle")
	if out, err := exec.Command(py, "../profiler/analyze/testdata/snaptool.py", "synth", "kv_oom", snap).CombinedOutput(); err != nil {
		t.Fatalf("snaptool: %v %s", err, out)
	}
	c := start(t, Config{}, nil)
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": snap}}}, &sum)
	local := string(uri.File("/workspace/proj/train.py"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		d := c.diags[local]
		c.mu.Unlock()
		if len(d) > 0 {
			m := d[0].Message
			if d[0].Code != "oom" || d[0].Range.Start.Line != 29 || !strings.Contains(m, "batch 8 x 100 tokens, 2.00 KiB a token") ||
				!strings.Contains(m, "\nFix: the KV cache (past_key_values.layers[*].keys in generate) takes 2.00 KiB a token") ||
				!strings.Contains(m, "at 100 tokens a batch of") {
				t.Errorf("diagnostic %+v", d[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no diagnostics on %s: %v", local, c.diags)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDiagnosticForARealOOMInGeneration: the agent's capture of batch
// generate() running out of a 3 GiB cap on the H200 (GPT-2 medium,
// examples/snapshots/inference/gen_oom.pickle.gz) puts the OOM diagnostic on
// the generate() line with the KV cache's size per token and what fits.
func TestDiagnosticForARealOOMInGeneration(t *testing.T) {
	snap := golden.Gunzip(t, "../examples/snapshots/inference/gen_oom.pickle.gz")
	c := start(t, Config{}, nil)
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": snap}}}, &sum)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		var found []string
		for u, ds := range c.diags {
			for _, d := range ds {
				if strings.HasSuffix(u, "/workloads.py") && d.Code == "oom" {
					found = append(found, fmt.Sprintf("%d %s", d.Range.Start.Line, d.Message))
				}
			}
		}
		c.mu.Unlock()
		if len(found) > 0 {
			m := found[0]
			if !strings.HasPrefix(m, "33 ") || !strings.Contains(m, "batch 32 x 512 tokens, 96.00 KiB a token") ||
				!strings.Contains(m, "at 512 tokens a batch of 31 fits") {
				t.Errorf("diagnostic %q", m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no OOM diagnostic on workloads.py: %v", c.diags)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
