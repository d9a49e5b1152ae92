package lsp

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/flame"
)

// TestNewestShowRequestWins: analyses finish in any order, and a snapshot
// whose request came earlier (one the daemon stored in the background) never
// replaces one the user asked for later, even when its analysis ends last.
func TestNewestShowRequestWins(t *testing.T) {
	c := start(t, Config{}, nil)
	s := c.srv
	oom, train := filepath.Join(fixtures, "snapshots/oom_batch.pickle"), filepath.Join(fixtures, "snapshots/gpt2_train.pickle")
	background, asked := s.nextShow(train), s.nextShow(oom)
	// The user's request finishes first ...
	if _, err := s.openAndShowAsked(context.Background(), oom, asked); err != nil {
		t.Fatal(err)
	}
	// ... then the background one, asked for before it.
	l, err := s.openAndShowAsked(context.Background(), train, background)
	if err != nil || l == nil {
		t.Fatal(err)
	}
	if got := filepath.Base(s.shown().path); got != "oom_batch.pickle" {
		t.Errorf("shown %s: an older request replaced a newer one", got)
	}
	if !s.showAsked(l, s.nextShow(train)) || filepath.Base(s.shown().path) != "gpt2_train.pickle" {
		t.Error("a later request was not shown")
	}
}

// TestFlameWaitsForTheSnapshotBeingRead: the flame graph and the report asked
// for while the snapshot the editor opened with is still being analysed
// answer once it is, instead of "no snapshot is open".
func TestFlameWaitsForTheSnapshotBeingRead(t *testing.T) {
	c := start(t, Config{}, nil)
	s := c.srv
	release := make(chan struct{})
	var once sync.Once
	s.snaps.progress = func(int64, int64) { once.Do(func() { <-release }) }
	path := filepath.Join(fixtures, "snapshots/gpt2_train.pickle")
	n := s.nextShow(path) // as the initialized handler does, before its goroutine
	go s.openAndShowAsked(context.Background(), path, n)

	type answer struct {
		tree flame.Tree
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		a.err = c.conn.Call(context.Background(), "workspace/executeCommand", map[string]any{"command": command.FlameGraph, "arguments": []any{map[string]string{"format": "tree"}}}, &a.tree)
		got <- a
	}()
	// Release the analysis only once the flame request waits for it too.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.snaps.mu.Lock()
		l := s.snaps.byPath[path]
		waiting := l != nil && l.waiters == 2
		s.snaps.mu.Unlock()
		if waiting {
			break
		}
		select {
		case a := <-got:
			t.Fatalf("the flame graph answered before the snapshot was read: %v", a.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the flame request never waited for the snapshot")
		}
	}
	close(release)
	a := <-got
	if a.err != nil || a.tree.Root == nil || a.tree.Root.Value == 0 {
		t.Fatalf("flame graph: %v, %+v", a.err, a.tree.Root)
	}
}
