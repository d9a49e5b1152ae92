package analyze_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// The recordings of examples/record/record_piles.py (issue #16) against what
// each run measured (NAME.json beside it): the iterations a finding counts,
// its bytes, and the level at each step's end. TestExpectedFindings checks
// their kinds, lines and step counts.

// pileFacts is what record_piles.py wrote about one run.
type pileFacts struct {
	Iterations       int     `json:"iterations"`
	AllocatedAfter   []int64 `json:"allocated_after"` // torch.cuda.memory_allocated() after each iteration
	KeptPerIteration int64   `json:"kept_per_iteration"`
	Schedule         []int   `json:"schedule"` // the length of each iteration (the caches keyed by length)
	Shapes           [][]int `json:"shapes"`   // the (batch, length) of each request (ucache_workspace)
	CacheBytes       int64   `json:"cache_bytes"`
}

// pileRun analyses one record_piles.py recording (through its label, so a
// .vsm is found too) and reads its facts.
func pileRun(t *testing.T, name string) (*analyze.Result, pileFacts) {
	t.Helper()
	for _, e := range expectations(t) {
		if e.Name != name {
			continue
		}
		r, why := analyseLabelled(t, e)
		if r == nil {
			t.Fatalf("%s: %s", name, why)
		}
		p := filepath.Join("..", "..", e.File+".json")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f pileFacts
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return r, f
	}
	t.Fatalf("%s is not labelled", name)
	return nil, pileFacts{}
}

// firstSeen lists the iterations at which a key first came: where a cache
// keyed by it made a new entry.
func firstSeen(keys []string) []int64 {
	seen := map[string]bool{}
	var out []int64
	for i, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, int64(i))
		}
	}
	return out
}

// Each unbounded cache's finding says how many entries it made, in how many
// steps, and the last step that added one: the iterations at which the
// script's schedule brought a new length (or shape). An iteration ends
// before the next one's new entry (ucache_bias_train's steps come from
// annotations, the other two from periodicity).
func TestPileCachesFollowTheirSchedule(t *testing.T) {
	for _, name := range []string{"ucache_bias_train", "ucache_mask_infer", "ucache_workspace"} {
		t.Run(name, func(t *testing.T) {
			r, facts := pileRun(t, name)
			var keys []string
			for _, n := range facts.Schedule {
				keys = append(keys, fmt.Sprint(n))
			}
			for _, s := range facts.Shapes {
				keys = append(keys, fmt.Sprint(s))
			}
			newAt := firstSeen(keys)
			n := one(t, r, analyze.KindUnboundedCache).Evidence.Numbers
			if n["blocks"] != int64(len(newAt)) || n["bytes"] != facts.CacheBytes || n["steps_with_new_blocks"] != int64(len(newAt)) ||
				n["first_new_step"] != newAt[0] || n["last_new_step"] != newAt[len(newAt)-1] {
				t.Errorf("%v; the run made %d entries (%d bytes) at iterations %v", n, len(newAt), facts.CacheBytes, newAt)
			}
		})
	}
}

// Each loop accumulation keeps what the script keeps per iteration, from
// as many iterations as it keeps them: all of them in the evaluation and
// the generation, the first 12 steps in accum_train_preds (it clears its
// list after step 11). Its evidence lines are the loop's line and, where the
// blocks are allocated in a function the loop calls (SegNet.forward's
// return, record_piles.py:173), that line too.
func TestPileAccumulationsCountIterations(t *testing.T) {
	for _, c := range []struct {
		name  string
		alive int64 // 0: all the run's iterations
		lines string
	}{{"accum_eval_logits", 0, "[record_piles.py:135]"}, {"accum_gen_scores", 0, "[record_piles.py:155]"},
		{"accum_train_preds", 12, "[record_piles.py:185 record_piles.py:173]"}} {
		t.Run(c.name, func(t *testing.T) {
			r, facts := pileRun(t, c.name)
			alive := c.alive
			if alive == 0 {
				alive = int64(facts.Iterations)
			}
			f := one(t, r, analyze.KindLoopAccumulation)
			var lines []string
			for _, l := range f.Evidence.Lines {
				lines = append(lines, fmt.Sprintf("%s:%d", filepath.Base(l.File), l.Line))
			}
			if got := fmt.Sprint(lines); got != c.lines {
				t.Errorf("evidence lines %s, want %s", got, c.lines)
			}
			n := f.Evidence.Numbers
			if n["iterations_alive_at_peak"] != alive || n["bytes_per_iteration"] != facts.KeptPerIteration {
				t.Errorf("%v; the run kept %d bytes an iteration from %d iterations", n, facts.KeptPerIteration, alive)
			}
		})
	}
}

// In inference loops found from periodicity, the level at each step's end
// is what the loop read with memory_allocated() after the iteration. In
// healthy_eval_host the last iteration's output is freed only when the
// function returns, after the loop read it, so its step ends lower: the
// last boundary is where the loop's memory is given back.
func TestPileStepsEndWhereTheLoopMeasured(t *testing.T) {
	for _, c := range []struct {
		name     string
		skipLast bool
	}{{"accum_eval_logits", false}, {"healthy_lru_cache", false}, {"healthy_eval_host", true}} {
		t.Run(c.name, func(t *testing.T) {
			r, facts := pileRun(t, c.name)
			if r.StepSource != analyze.StepsFromPeriodicity || len(r.Steps) != len(facts.AllocatedAfter) {
				t.Fatalf("%d steps from %q, the loop measured %d iterations", len(r.Steps), r.StepSource, len(facts.AllocatedAfter))
			}
			for i, s := range r.Steps {
				if c.skipLast && i == len(r.Steps)-1 {
					break
				}
				if s.LiveBytesAtEnd != facts.AllocatedAfter[i] {
					t.Errorf("iteration %d ends with %d live, memory_allocated() said %d", i, s.LiveBytesAtEnd, facts.AllocatedAfter[i])
				}
			}
		})
	}
}
