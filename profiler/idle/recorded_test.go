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
// the program's own measure (idle by CUDA events). The *_cpu recordings are
// CPU runs of jupyter/tests/stacks_cpu.py (test_stacks_cpu.py writes them with
// VRAMSCOPE_UPDATE_TESTDATA=1): the agent's real sampler, and a utilisation
// series built from the program's own clock (the GPU idles exactly while the
// program waits), so their measured idle is exact.

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
		// CPU runs of jupyter/tests/stacks_cpu.py (the real sampler; the
		// utilisation built from the program's clock, see CPU runs below).
		{"collective_cpu", CauseCollective, "stacks_cpu.py", 130, 0.005},
		{"sync_cpu_02", "", "", 0, 0.005},
		{"sync_cpu_10", CauseSync, "stacks_cpu.py", 155, 0.005},
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

// Two torch.distributed ranks on CPU (gloo), rank 1 sleeping 1.2 s before
// each all_reduce: rank 0's sampler marked its wait in all_reduce as a
// collective, and the join puts the idle time on that line with the
// collective's fix. Windows that hold both the wait and the step's CPU work
// split their idle time over both (the join cannot tell the order inside a
// second), so the Python-side share is the step's line, never the all_reduce.
func TestRecordedCollectiveWait(t *testing.T) {
	in, f := load(t, "collective_cpu")
	r := Join(in, Options{})
	c := r.Finding()
	if c == nil || c.Kind != CauseCollective {
		t.Fatalf("finding %+v, want a collective wait", c)
	}
	if c.Fix != fix(CauseCollective, false) || len(c.Lines) != 1 || c.Lines[0].Frame != c.Site.Frame || c.Site.Func != "collective" {
		t.Errorf("collective cause %+v: want the all_reduce line in collective() as its only line, and its fix", c)
	}
	if c.Share < 0.75*f.Measure.IdleShare {
		t.Errorf("collective %.3f of %.3f idle: most of the idle time is the wait", c.Share, f.Measure.IdleShare)
	}
	for _, k := range r.Causes[1:] {
		if k.Kind != CausePython || k.Site.Func != "spin" {
			t.Errorf("cause %s at %v: the rest is the step's CPU work (spin)", k.Kind, k.Site.Frame)
		}
	}
}
