package daemon

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/forecast"
)

// recordedLevels reads one of the H200 runs in profiler/forecast/testdata
// (examples/road; docs/oom-warning.md): its levels, its cap, and where it
// failed (oomStep -1: it completed).
func recordedLevels(t *testing.T, name string) (levels []forecast.Level, capBytes int64, oomStep int, oomT float64) {
	t.Helper()
	path := "../profiler/forecast/testdata/" + name + ".json"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Outcome  string  `json:"outcome"`
		CapBytes int64   `json:"cap_bytes"`
		OOMStep  int     `json:"oom_step"`
		OOMT     float64 `json:"oom_t"`
		Steps    []struct {
			Step                      int
			T                         float64
			Allocated, Reserved, Peak int64
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, s := range r.Steps {
		levels = append(levels, forecast.Level{Step: s.Step, TimeS: s.T, Allocated: s.Allocated, Reserved: s.Reserved, Peak: s.Peak})
	}
	if r.Outcome != "oom" {
		r.OOMStep = -1
	}
	return levels, r.CapBytes, r.OOMStep, r.OOMT
}

// TestWarnerOnRecordedRuns: fed the H200 runs' levels as they were recorded
// (every 10 steps), the warner warns once on each leak, well before it ran
// out, and never on the healthy runs (nor on the late long batch, whose OOM
// no trend announced).
func TestWarnerOnRecordedRuns(t *testing.T) {
	for _, name := range []string{"leak", "grad_accum", "varlen", "eval_warmup", "late_long"} {
		t.Run(name, func(t *testing.T) {
			levels, capBytes, oomStep, oomT := recordedLevels(t, name)
			var fired []api.MemoryForecast
			w := newMemoryWarner(func(_ int, f api.MemoryForecast) { fired = append(fired, f) })
			t0 := time.Unix(1_800_000_000, 0)
			for n := 10; n <= len(levels); n += 10 {
				w.Observe(1, levels[:n], capBytes, t0.Add(time.Duration(levels[n-1].TimeS*float64(time.Second))))
			}
			leak := name == "leak"
			if !leak {
				if len(fired) != 0 {
					t.Errorf("warned on a healthy run: %+v", fired[0])
				}
				return
			}
			if len(fired) != 1 {
				t.Fatalf("%d warnings on a leak, want 1", len(fired))
			}
			f := fired[0]
			at := levels[f.Step].TimeS
			t.Logf("%s: warned at step %d (%.1f s), projected full at step %d; failed at step %d (%.1f s): %d steps, %.1f s before",
				name, f.Step, at, f.ProjectedStep, oomStep, oomT, oomStep-f.Step, oomT-at)
			if oomStep-f.Step < oomStep/2 {
				t.Errorf("warned %d steps before the failure at step %d", oomStep-f.Step, oomStep)
			}
		})
	}
}
