package lsp

import (
	"context"
	"path/filepath"
	"testing"
)

// TestNewestShowRequestWins: analyses finish in any order, and a snapshot
// whose request came earlier (one the daemon stored in the background) never
// replaces one the user asked for later, even when its analysis ends last.
func TestNewestShowRequestWins(t *testing.T) {
	c := start(t, Config{}, nil)
	s := c.srv
	background, asked := s.nextShow(), s.nextShow()
	// The user's request finishes first ...
	if _, err := s.openAndShowAsked(context.Background(), filepath.Join(fixtures, "snapshots/oom_batch.pickle"), asked); err != nil {
		t.Fatal(err)
	}
	// ... then the background one, asked for before it.
	l, err := s.openAndShowAsked(context.Background(), filepath.Join(fixtures, "snapshots/gpt2_train.pickle"), background)
	if err != nil || l == nil {
		t.Fatal(err)
	}
	if got := filepath.Base(s.shown().path); got != "oom_batch.pickle" {
		t.Errorf("shown %s: an older request replaced a newer one", got)
	}
	if !s.showAsked(l, s.nextShow()) || filepath.Base(s.shown().path) != "gpt2_train.pickle" {
		t.Error("a later request was not shown")
	}
}
