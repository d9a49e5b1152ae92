package lsp

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// TestCancelStopsTheAnalysis: the editor cancels an openSnapshot request
// ($/cancelRequest) or closes while its snapshot is being analysed; the
// request answers RequestCancelled (when the editor is still there), the
// analysis stops and is not kept, and the next open analyses afresh.
func TestCancelStopsTheAnalysis(t *testing.T) {
	snap := filepath.Join(fixtures, "snapshots/llama_lora_gc.pickle")
	open := map[string]any{"command": cmdOpenSnapshot, "arguments": []any{map[string]string{"path": snap}}}
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
				var sum Summary
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
