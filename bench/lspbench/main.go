// Command lspbench times the language server as an editor sees it: it runs
// `vramscope lsp` as a child over stdio, opens the 1M-entry snapshot and a
// 2,000-line file it attributes memory to, and measures the time to the first
// hints (beside `vramscope analyze` on the same file, in the same run), then
// the latency of inlay-hint and hover requests. It prints the figures and
// writes them to docs/lsp-bench.md (make bench-lsp).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

var (
	bin      = flag.String("bin", "bin/vramscope", "the vramscope binary")
	snapshot = flag.String("snapshot", ".bench/gpt2_long_1000k.pickle", "snapshot to open (make bench decompresses it)")
	source   = flag.String("source", "../shared/fixtures/trainer/train_gpt2.py", "the recorded script, padded to -lines")
	lines    = flag.Int("lines", 2000, "lines of the opened file")
	n        = flag.Int("n", 300, "requests of each kind")
	out      = flag.String("out", "docs/lsp-bench.md", "markdown report")
)

type conn struct {
	w  io.Writer
	r  *bufio.Reader
	id int
}

func (c *conn) send(msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	b, _ := json.Marshal(msg)
	fmt.Fprintf(c.w, "Content-Length: %d\r\n\r\n%s", len(b), b)
}

// call sends a request and reads messages until its response, answering the
// server's own requests (refreshes) with null.
func (c *conn) call(method string, params any) json.RawMessage {
	c.id++
	id := c.id
	c.send(map[string]any{"id": id, "method": method, "params": params})
	for {
		m := c.read()
		if m.Method != "" && m.ID != nil {
			c.send(map[string]any{"id": m.ID, "result": nil})
			continue
		}
		if m.Method == "" && m.ID != nil && string(*m.ID) == strconv.Itoa(id) {
			if m.Error != nil {
				die(fmt.Errorf("%s: %s", method, m.Error))
			}
			return m.Result
		}
	}
}

type message struct {
	ID     *json.RawMessage `json:"id"`
	Method string           `json:"method"`
	Result json.RawMessage  `json:"result"`
	Error  json.RawMessage  `json:"error"`
}

func (c *conn) read() message {
	length := 0
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			die(fmt.Errorf("reading from the server: %v", err))
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			length, _ = strconv.Atoi(v)
		}
	}
	b := make([]byte, length)
	if _, err := io.ReadFull(c.r, b); err != nil {
		die(err)
	}
	var m message
	json.Unmarshal(b, &m)
	return m
}

func main() {
	flag.Parse()
	snap, _ := filepath.Abs(*snapshot)
	if _, err := os.Stat(snap); err != nil {
		die(fmt.Errorf("%v (run make bench first: it decompresses the shared large snapshots)", err))
	}
	ws, _ := os.MkdirTemp("", "lspbench")
	defer os.RemoveAll(ws)
	file := filepath.Join(ws, "trainer", "train_gpt2.py")
	src, err := os.ReadFile(*source)
	if err != nil {
		die(err)
	}
	text := string(src)
	for have := strings.Count(text, "\n"); have < *lines; have++ {
		text += "# padding line " + strconv.Itoa(have) + "\n"
	}
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte(text), 0o644)

	t := time.Now()
	if err := exec.Command(*bin, "analyze", "--json", snap).Run(); err != nil {
		die(err)
	}
	analyzeTime := time.Since(t)

	cmd := exec.Command(*bin, "lsp", "--daemon", "off")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		die(err)
	}
	c := &conn{w: stdin, r: bufio.NewReaderSize(stdout, 1<<20)}
	wsURI := "file://" + ws
	c.call("initialize", map[string]any{"rootUri": wsURI, "capabilities": map[string]any{},
		"workspaceFolders": []any{map[string]string{"uri": wsURI, "name": "ws"}}})
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	docURI := "file://" + file
	c.send(map[string]any{"method": "textDocument/didOpen", "params": map[string]any{"textDocument": map[string]any{
		"uri": docURI, "languageId": "python", "version": 1, "text": text}}})
	full := map[string]any{"textDocument": map[string]string{"uri": docURI},
		"range": map[string]any{"start": map[string]int{"line": 0, "character": 0}, "end": map[string]int{"line": *lines, "character": 0}}}

	t = time.Now()
	c.call("workspace/executeCommand", map[string]any{"command": "vramscope.openSnapshot", "arguments": []any{map[string]string{"path": snap}}})
	var hints []any
	json.Unmarshal(c.call("textDocument/inlayHint", full), &hints)
	first := time.Since(t)
	if len(hints) == 0 {
		die(fmt.Errorf("no hints on %s", file))
	}

	hintTimes := timeIt(*n, func() { c.call("textDocument/inlayHint", full) })
	hover := map[string]any{"textDocument": map[string]string{"uri": docURI}, "position": map[string]int{"line": 21, "character": 4}}
	var h struct {
		Contents struct{ Value string } `json:"contents"`
	}
	json.Unmarshal(c.call("textDocument/hover", hover), &h)
	if !strings.Contains(h.Contents.Value, "live at peak") {
		die(fmt.Errorf("no hover on line 22"))
	}
	hoverTimes := timeIt(*n, func() { c.call("textDocument/hover", hover) })
	c.call("shutdown", nil)
	c.send(map[string]any{"method": "exit"})
	cmd.Wait()

	var b strings.Builder
	fmt.Fprintf(&b, "## Language server (`make bench-lsp`, bench/lspbench)\n\n")
	fmt.Fprintf(&b, "Run on %s (%s/%s, nproc %d): `vramscope lsp` as a child process over stdio, the 1M-entry snapshot `%s` and a %d-line copy of the recorded `train_gpt2.py` (%d hints); %d requests of each kind, one at a time.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), filepath.Base(snap), *lines, len(hints), *n)
	fmt.Fprintf(&b, "| figure | measured | goal |\n|---|---:|---|\n")
	fmt.Fprintf(&b, "| first hints after opening the snapshot | %s (`vramscope analyze` alone: %s; difference %s) | ≤ analysis + 100 ms %s |\n",
		ms(first), ms(analyzeTime), ms(first-analyzeTime), mark(first <= analyzeTime+100*time.Millisecond))
	fmt.Fprintf(&b, "| inlay hints, whole file: p50 / p99 | %s / %s | p99 ≤ 20 ms %s |\n", ms(pct(hintTimes, 50)), ms(pct(hintTimes, 99)), mark(pct(hintTimes, 99) <= 20*time.Millisecond))
	fmt.Fprintf(&b, "| hover on line 22: p50 / p99 | %s / %s | ≤ 10 ms %s |\n", ms(pct(hoverTimes, 50)), ms(pct(hoverTimes, 99)), mark(pct(hoverTimes, 99) <= 10*time.Millisecond))
	fmt.Print(b.String())
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		die(err)
	}
}

func timeIt(n int, f func()) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		t := time.Now()
		f()
		out[i] = time.Since(t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "lspbench:", err)
	os.Exit(1)
}
