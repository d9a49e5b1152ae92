package analyze

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// TestRunContextCancelled: an analysis whose request is already gone does not
// decode; a live context gives exactly Run's result.
func TestRunContextCancelled(t *testing.T) {
	const path = "../../examples/snapshots/agent_gpt2.pickle"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunContext(ctx, path, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	a, err := Run(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunContext(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Error("RunContext with a live context differs from Run")
	}
}

// BenchmarkCancelMidDecode measures how long an analysis of the 5M-entry
// snapshot (make bench decompresses it to .bench/; $VRAMSCOPE_SNAPSHOT_5M
// names another copy) takes to return once its context is cancelled, in the
// planning pass (at 30% of it) and in the decoding pass (at 40% of it).
// Goal: ≤ 100 ms. make bench runs it and writes the figures to docs/benchmarks.md.
//
//	go test ./profiler/analyze -run XXX -bench CancelMidDecode -benchtime 5x
func BenchmarkCancelMidDecode(b *testing.B) {
	path := "../../.bench/gpt2_long_5000k.pickle"
	if p := os.Getenv("VRAMSCOPE_SNAPSHOT_5M"); p != "" {
		path = p
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Skipf("%v: run make bench first (it decompresses the 5M-entry snapshot)", err)
	}
	for _, at := range []struct {
		name  string
		share float64 // of both passes' bytes (each pass reads the file once)
	}{{"planning", 0.15}, {"decoding", 0.7}} {
		b.Run(at.name, func(b *testing.B) {
			var worst, total time.Duration
			for range b.N {
				lat := cancelAt(b, path, int64(at.share*float64(2*st.Size())))
				total += lat
				worst = max(worst, lat)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/cancel")
			b.ReportMetric(float64(worst.Microseconds())/1000, "ms-worst")
		})
	}
}

// cancelAt runs an analysis of path, cancels it once its progress passes
// bytes, and returns the time from cancel to return.
func cancelAt(b *testing.B, path string, bytes int64) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var at time.Time
	_, err := RunContext(ctx, path, Options{Progress: func(done, total int64) {
		if done >= bytes && at.IsZero() {
			at = time.Now()
			cancel()
		}
	}})
	lat := time.Since(at)
	if !errors.Is(err, context.Canceled) || at.IsZero() {
		b.Fatalf("err = %v, cancelled: %v", err, !at.IsZero())
	}
	return lat
}
