package idle

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The recordings in testdata are the join's inputs from the H200 run of
// examples/idle (docs/idle.md): NAME.input.json is what `vramscope idle
// --json --raw` returned over the program's measured phase, NAME.facts.json
// the program's own measure (idle by CUDA events).

type facts struct {
	Measure struct {
		IdleShare float64 `json:"idle_share_measured"`
	} `json:"measure"`
}

func load(t *testing.T, name string) (Input, facts) {
	t.Helper()
	var in Input
	var f facts
	for path, v := range map[string]any{name + ".input.json": &in, name + ".facts.json": &f} {
		b, err := os.ReadFile(filepath.Join("testdata", path))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return in, f
}

func TestRecordedRuns(t *testing.T) {
	cases := []struct {
		name      string
		kind      Kind   // the finding's cause; "" none
		file      string // the finding's line
		line      int
		tolerance float64 // |reported - measured| idle share
	}{
		{"healthy", "", "", 0, 0.02},
		{"item_sync", CauseSync, "item_sync.py", 23, 0.04},
		{"slow_loader", CauseDataLoader, "slow_loader.py", 14, 0.03},
		{"checkpoint", CauseCheckpoint, "checkpoint.py", 35, 0.08},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, f := load(t, c.name)
			r := Join(in, Options{})
			if d := math.Abs(r.IdleShare - f.Measure.IdleShare); d > c.tolerance {
				t.Errorf("idle %.3f, measured by CUDA events %.3f: off by %.3f", r.IdleShare, f.Measure.IdleShare, d)
			}
			got := r.Finding()
			if c.kind == "" {
				if got != nil {
					t.Fatalf("finding %s at %v (%.1f%% idle), want none", got.Kind, got.Site.Frame, 100*r.IdleShare)
				}
				return
			}
			if got == nil || got.Kind != c.kind || filepath.Base(got.Site.File) != c.file || got.Site.Line != c.line {
				t.Fatalf("finding %+v, want %s at %s:%d", got, c.kind, c.file, c.line)
			}
			for _, cs := range r.Causes {
				if cs.Kind == CauseNoSamples && cs.Share > 0.01 {
					t.Errorf("no_samples %.1f%%: a window the sampler missed belongs where the thread was last seen", 100*cs.Share)
				}
			}
		})
	}
}
