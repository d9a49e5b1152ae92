package torchsnap

import (
	"context"
	"errors"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

const stacksSnapshot = "../../../shared/fixtures/snapshots/gpt2_12l_python_stacks.pickle"

// TestReadFileContextStopsMidDecode cancels from the event callback, partway
// through the decoding pass of a real 3.4 MB snapshot (its buffer refills
// several times), and checks the read stops with ctx's error well before the
// snapshot's end.
func TestReadFileContextStopsMidDecode(t *testing.T) {
	all := 0
	if _, err := ReadFile(stacksSnapshot, profiler.NewFrames(), func(int, *profiler.Event) error { all++; return nil }, Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	_, err := ReadFileContext(ctx, stacksSnapshot, profiler.NewFrames(), func(int, *profiler.Event) error {
		seen++
		if seen == all/10 {
			cancel()
		}
		return nil
	}, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if seen >= all*3/4 {
		t.Errorf("cancelled after %d of %d events, it decoded %d: it did not stop soon", all/10, all, seen)
	}
}

// TestReadFileContextUncancelledIsReadFile checks a live context changes nothing.
func TestReadFileContextUncancelledIsReadFile(t *testing.T) {
	count := func(read func(EventFunc) (*Snapshot, error)) (int, int) {
		n := 0
		s, err := read(func(int, *profiler.Event) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return n, len(s.Segments)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e1, s1 := count(func(f EventFunc) (*Snapshot, error) {
		return ReadFile(stacksSnapshot, profiler.NewFrames(), f, Options{})
	})
	e2, s2 := count(func(f EventFunc) (*Snapshot, error) {
		return ReadFileContext(ctx, stacksSnapshot, profiler.NewFrames(), f, Options{})
	})
	if e1 != e2 || s1 != s2 || e1 == 0 {
		t.Errorf("ReadFile: %d events, %d segments; ReadFileContext: %d, %d", e1, s1, e2, s2)
	}
}
