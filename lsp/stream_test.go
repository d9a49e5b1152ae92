package lsp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// serveRaw runs a server on a pipe, writes input to it and closes its end,
// and returns what Serve returned. The server's output is read and dropped.
func serveRaw(t *testing.T, input []byte) error {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- New(Config{Daemon: "off"}).Serve(context.Background(), a) }()
	go io.Copy(io.Discard, b)
	go func() {
		b.Write(input)
		b.Close()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve still runs 20 s after its input ended")
		return nil
	}
}

func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

// TestFramingErrors: input that breaks the base protocol ends Serve with an
// error saying what was wrong (vramscope lsp prints it and exits non-zero);
// it used to end with nil, and the command exited 0 without a word. A header
// line is bounded: a 1 MiB one is refused after 4 KiB, not buffered.
func TestFramingErrors(t *testing.T) {
	initialize := frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	for input, want := range map[string]string{
		strings.Repeat("X", 1<<20):                         "a header line longer than 4096 bytes",
		"Content-Length: 999999999999\r\n\r\n{}":           "a message of 999999999999 bytes (Content-Length) exceeds the limit of 67108864",
		"Content-Type: application/json\r\n\r\n{}":         "a message without a Content-Length header",
		"Content-Length: 2\n\n{}":                          `ends in \n, not \r\n`,
		"Content-Length: abc\r\n\r\n":                      `Content-Length " abc" is not a length`,
		initialize + "Content-Length: 100\r\n\r\n{\"json":  "the input ends 6 bytes into a message of 100 (Content-Length)",
		initialize + "Content-Length: 5\r\n":               "the input ends inside the headers of a message",
		"Content-Length: 5\r\n\r\nhello":                   "a message that is not a JSON-RPC message",
		"no colon here\r\n\r\n":                            "a header line that is not NAME: VALUE",
		strings.Repeat("X-Pad: 1\r\n", 17) + "\r\n":        "more than 16 header lines",
		initialize + frame(`{"jsonrpc":"2.0","method":7}`): "a message that is not a JSON-RPC message",
	} {
		err := serveRaw(t, []byte(input))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("input %q: Serve returned %v, want %q", clip([]byte(input)), err, want)
		}
	}
	// The input ending between messages is the normal end.
	if err := serveRaw(t, []byte(initialize)); err != nil {
		t.Errorf("a clean end: %v", err)
	}
}

// TestNotInitialized: requests before initialize get ServerNotInitialized
// (-32002), not answers; notifications are dropped; exit still works.
func TestNotInitialized(t *testing.T) {
	a, b := net.Pipe()
	srv := New(Config{Daemon: "off"})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), a) }()
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewBufferedStream(b, jsonrpc2.VSCodeObjectCodec{}), jsonrpc2.AsyncHandler(&fakeClient{t: t}))
	defer conn.Close()
	ctx := context.Background()
	for _, method := range []string{"textDocument/hover", "workspace/executeCommand", "shutdown", "textDocument/noSuchMethod"} {
		err := conn.Call(ctx, method, map[string]any{}, nil)
		var re *jsonrpc2.Error
		if !asRPC(err, &re) || re.Code != -32002 {
			t.Errorf("%s before initialize: %v, want code -32002", method, err)
		}
	}
	if err := conn.Notify(ctx, "initialized", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	var res initializeResult
	if err := conn.Call(ctx, "initialize", map[string]any{"capabilities": map[string]any{}}, &res); err != nil || res.Capabilities.HoverProvider != true {
		t.Fatalf("initialize: %v %+v", err, res)
	}
	var hints []InlayHint
	if err := conn.Call(ctx, "textDocument/inlayHint", map[string]any{"textDocument": map[string]string{"uri": "file:///x.py"}}, &hints); err != nil {
		t.Errorf("inlayHint after initialize: %v", err)
	}
	conn.Notify(ctx, "exit", nil)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exit did not end Serve")
	}
}

func asRPC(err error, re **jsonrpc2.Error) bool {
	e, ok := err.(*jsonrpc2.Error)
	*re = e
	return ok
}

// bigHover is a hover request padded with n small JSON values, the kind of
// message jsonrpc2's decoding (params into []any, then encoded again)
// blows up most.
func bigHover(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":2,"method":"textDocument/hover","params":{"textDocument":{"uri":"file:///x.py"},"position":{"line":0,"character":0},"pad":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"a"`)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// allocated runs fn and returns the bytes it allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeMessageMemory measures what one 16 MiB request costs to read and
// answer, here and through jsonrpc2's own codec (as Serve read before): the
// codec decoded the params into maps and slices of interfaces and encoded
// them again, about 30 times the message; the raw params cost about twice.
func TestLargeMessageMemory(t *testing.T) {
	msg := bigHover(4 << 20) // 16 MiB
	size := uint64(len(msg))
	input := append([]byte(frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)), fmt.Sprintf("Content-Length: %d\r\n\r\n", len(msg))...)
	input = append(input, msg...)

	// Through the server: initialize, the hover, and its answer.
	ours := allocated(func() {
		if err := serveRaw(t, input); err != nil {
			t.Fatal(err)
		}
	})
	// Through jsonrpc2's codec, with a handler that only decodes the params.
	theirs := allocated(func() {
		a, b := net.Pipe()
		h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
			var p struct{ Position struct{ Line int } }
			if r.Params != nil {
				json.Unmarshal(*r.Params, &p)
			}
			return nil, nil
		})
		conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewBufferedStream(a, jsonrpc2.VSCodeObjectCodec{}), h, jsonrpc2.SetLogger(quiet{}))
		go io.Copy(io.Discard, b)
		b.Write(input)
		b.Close()
		<-conn.DisconnectNotify()
	})
	t.Logf("a %d MiB request: %.1f MiB allocated reading and answering it (%.1fx), %.1f MiB through jsonrpc2's codec (%.1fx)",
		size>>20, float64(ours)/(1<<20), float64(ours)/float64(size), float64(theirs)/(1<<20), float64(theirs)/float64(size))
	if ours > 3*size {
		t.Errorf("reading a %d-byte request allocated %d bytes, want under 3x", size, ours)
	}
}
