package lsp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/lsp/command"
	"go.lsp.dev/protocol"
)

// TestCancelStopsTheAnalysis: the editor cancels an openSnapshot request
// ($/cancelRequest) or closes while its snapshot is being analysed; the
// request answers RequestCancelled (when the editor is still there), the
// analysis stops and is not kept, and the next open analyses afresh.
func TestCancelStopsTheAnalysis(t *testing.T) {
	snap := filepath.Join(fixtures, "snapshots/llama_lora_gc.pickle")
	open := map[string]any{"command": command.OpenSnapshot, "arguments": []any{map[string]string{"path": snap}}}
	for _, how := range []string{"cancelRequest", "editor closes"} {
		t.Run(how, func(t *testing.T) {
			c := start(t, Config{}, nil)
			started, release := holdAnalysis(c.srv)
			id := jsonrpc2.ID{Num: 4242}
			errc := make(chan error, 1)
			go func() {
				errc <- c.conn.Call(context.Background(), "workspace/executeCommand", open, nil, jsonrpc2.PickID(id))
			}()
			<-started
			c.srv.snaps.mu.Lock()
			l := c.srv.snaps.byPath[snap]
			c.srv.snaps.mu.Unlock()
			if how == "cancelRequest" {
				c.conn.Notify(context.Background(), "$/cancelRequest", map[string]any{"id": 4242})
				var re *jsonrpc2.Error
				if err := <-errc; !errors.As(err, &re) || re.Code != codeRequestCancelled {
					t.Fatalf("the cancelled request answered %v, want RequestCancelled (%d)", err, codeRequestCancelled)
				}
			} else {
				c.conn.Close()
			}
			waitStopped(t, c.srv.snaps, l)
			close(release)
			<-l.done
			if !errors.Is(l.err, context.Canceled) {
				t.Errorf("the analysis ended with %v, want context.Canceled", l.err)
			}
			if how == "cancelRequest" {
				var sum command.Summary
				c.call("workspace/executeCommand", open, &sum)
				if sum.PeakBytes == 0 || c.srv.snaps.runs != 2 {
					t.Errorf("reopened: peak %d, %d analyses (want 2: the stopped one and a fresh one)", sum.PeakBytes, c.srv.snaps.runs)
				}
			}
		})
	}
}

// holdAnalysis makes the server's next analysis block at its first read
// until release is closed; started is closed once it blocks.
func holdAnalysis(s *Server) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.snaps.mu.Lock()
	s.snaps.progress = func(int64, int64) { once.Do(func() { close(started); <-release }) }
	s.snaps.mu.Unlock()
	return started, release
}

// waitStopped waits (ten seconds at most) until l's analysis has been told to stop.
func waitStopped(t *testing.T, c *snapshots, l *loaded) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		stopped := l.stopped
		c.mu.Unlock()
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the analysis was not stopped")
		}
	}
}

// TestMalformedCancelFlood: 20,000 malformed $/cancelRequest wrote 9,998
// log lines, and with the server's stderr unread (a log that blocks for
// ever here) the server stopped answering. Now the flood costs a line or
// two, and the server answers while its log is stuck.
func TestMalformedCancelFlood(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		var mu sync.Mutex
		var lines []string
		block := make(chan struct{})
		t.Cleanup(func() { close(block) })
		logf := func(f string, a ...any) {
			if stuck {
				<-block
			}
			mu.Lock()
			lines = append(lines, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		c := start(t, Config{Logf: logf}, nil)
		for i := 0; i < 20_000; i++ {
			c.conn.Notify(context.Background(), "$/cancelRequest", map[string]any{"id": []int{i}})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var hints []InlayHint
		err := c.conn.Call(ctx, "textDocument/inlayHint", InlayHintParams{TextDocument: protocol.TextDocumentIdentifier{URI: "file:///x.py"}}, &hints)
		cancel()
		if err != nil {
			t.Fatalf("stuck log %v: a request after the flood: %v", stuck, err)
		}
		mu.Lock()
		n, first := len(lines), ""
		if n > 0 {
			first = lines[0]
		}
		mu.Unlock()
		if !stuck && (n < 1 || n > 3 || !strings.Contains(first, "$/cancelRequest: ") || !strings.Contains(first, "invalid params")) {
			t.Errorf("%d log lines for 20,000 malformed cancels, the first %q", n, first)
		}
	}
}

// TestNotifyErrorCounts: the errors a notification method's interval did not
// log are logged as one count when it ends.
func TestNotifyErrorCounts(t *testing.T) {
	lines := make(chan string, 10)
	l := newServerLog(func(f string, a ...any) { lines <- fmt.Sprintf(f, a...) })
	l.interval = 50 * time.Millisecond
	for i := 0; i < 1000; i++ {
		l.notifyError("$/cancelRequest", errors.New("invalid params"))
	}
	for _, want := range []string{"$/cancelRequest: invalid params", "$/cancelRequest: 999 more errors like the last in 50ms"} {
		select {
		case got := <-lines:
			if got != want {
				t.Errorf("log %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q in 10 s", want)
		}
	}
}
