package forecast

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// recording is one program's per-step levels as examples/road/levels.py
// wrote them on the H200 (docs/oom-warning.md).
type recording struct {
	Program  string  `json:"program"`
	Outcome  string  `json:"outcome"` // "oom" or "completed"
	CapBytes int64   `json:"cap_bytes"`
	OOMStep  int     `json:"oom_step"`
	OOMT     float64 `json:"oom_t"`
	Steps    []struct {
		Step      int     `json:"step"`
		T         float64 `json:"t"`
		Allocated int64   `json:"allocated"`
		Reserved  int64   `json:"reserved"`
		Peak      int64   `json:"peak"`
	} `json:"steps"`
}

func readRecording(t *testing.T, name string) (recording, []Level) {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	lv := make([]Level, len(r.Steps))
	for i, s := range r.Steps {
		lv[i] = Level{Step: s.Step, TimeS: s.T, Allocated: s.Allocated, Reserved: s.Reserved, Peak: s.Peak}
	}
	return r, lv
}

// TestRecordedHealthy: the healthy runs on the H200 never project a full
// device, at any point of the run, against their own cap or one only 5%
// over their highest step peak; nor when read as the agent reads a run
// whose hooks pass its budget (readEvery: one step in 7, 14 or 25).
func TestRecordedHealthy(t *testing.T) {
	for _, name := range []string{"grad_accum", "varlen", "eval_warmup", "late_long"} {
		t.Run(name, func(t *testing.T) {
			r, lv := readRecording(t, name)
			neverGrowing(t, lv, tight(lv))
			neverGrowing(t, lv, r.CapBytes)
			for _, k := range []int{7, 14, 25} {
				neverGrowing(t, readEvery(lv, k), tight(lv))
			}
		})
	}
}

// readEvery is levels as the agent keeps them when it reads the allocator
// at every k-th step only: a read step's peak is the highest since the read
// before it (the peak is reset at reads), its allocated and reserved its own.
func readEvery(levels []Level, k int) []Level {
	var out []Level
	var top int64
	for i, l := range levels {
		top = max(top, l.Peak)
		if i%k == 0 {
			l.Peak, top = top, 0
			out = append(out, l)
		}
	}
	return out
}

// TestRecordedLeak: the leaking runs on the H200 are projected well before
// they ran out, and the projected step is near the step that failed:
// leak.py's own every-step levels, and the steps the daemon stored beside its
// OOM snapshot when it ran under the agent (2026-12-04, leak_agent_sparse:
// the agent read the allocator at one step in 11-18, 52 of 635, each read's
// peak covering the steps since the one before).
func TestRecordedLeak(t *testing.T) {
	for _, name := range []string{"leak", "leak_agent_sparse"} {
		t.Run(name, func(t *testing.T) {
			r, lv := readRecording(t, name)
			if r.Outcome != "oom" {
				t.Fatalf("%s did not run out: %s", name, r.Outcome)
			}
			first := -1
			for n := 10; n <= len(lv) && first < 0; n++ {
				pr := Project(lv[:n], r.CapBytes, Default())
				if !pr.Growing {
					continue
				}
				first = n
				stepsBefore, secondsBefore := r.OOMStep-pr.LastStep, r.OOMT-pr.LastTimeS
				t.Logf("%s: projected at step %d (%.1f s): full at step %d (%.1f s), %.2f MiB/step; it failed at step %d (%.1f s): %d steps, %.1f s before",
					name, pr.LastStep, pr.LastTimeS, pr.Step, pr.TimeS, pr.BytesPerStep/(1<<20), r.OOMStep, r.OOMT, stepsBefore, secondsBefore)
				if stepsBefore < r.OOMStep/2 {
					t.Errorf("projected only %d steps before the failure at step %d", stepsBefore, r.OOMStep)
				}
				if err := float64(pr.Step-r.OOMStep) / float64(r.OOMStep); err < -0.25 || err > 0.25 {
					t.Errorf("projected full at step %d, it failed at %d (%.0f%% off)", pr.Step, r.OOMStep, 100*err)
				}
			}
			if first < 0 {
				t.Fatalf("never projected before the failure at step %d", r.OOMStep)
			}
		})
	}
}

// TestRecordedVarlenWithLeak: the varlen run's real noise (its 1,200 step
// levels in a shuffled order, so that the run's own drift in batch lengths
// goes: step peaks from 1 to 6.2 GiB) with a leak of 3 MiB a step added
// from step 200 on: the leak is found and measured under the noise, not
// before it begins.
func TestRecordedVarlenWithLeak(t *testing.T) {
	_, rec := readRecording(t, "varlen")
	r := rand.New(rand.NewPCG(5, 6))
	r.Shuffle(len(rec), func(i, j int) { rec[i], rec[j] = rec[j], rec[i] })
	var lv []Level
	for i := range 1200 {
		l := rec[i]
		leak := int64(max(i-200, 0)) * 3 * mib
		l.Step, l.TimeS = i, float64(i)*0.07
		l.Peak, l.Allocated, l.Reserved = l.Peak+leak, l.Allocated+leak, l.Reserved+leak
		lv = append(lv, l)
	}
	capacity := tight(lv) + 1024*mib
	neverGrowing(t, lv[:300], capacity)
	first := -1
	var pr Projection
	for n := 300; n <= len(lv) && first < 0; n += 10 {
		if pr = Project(lv[:n], capacity, Default()); pr.Growing {
			first = n
		}
	}
	if first < 0 {
		t.Fatal("the leak under variable-length batches was never projected")
	}
	t.Logf("projected after %d steps: %.2f MiB/step, full at step %d (evidence %+v)", first, pr.BytesPerStep/mib, pr.Step, pr.Evidence)
	if pr.BytesPerStep < 2*mib || pr.BytesPerStep > 4*mib {
		t.Errorf("rate %.2f MiB/step, want about 3", pr.BytesPerStep/mib)
	}
	if first > 1000 || pr.Step < first {
		t.Errorf("projected after %d steps, full at step %d", first, pr.Step)
	}
}

// TestRecordedLeakSparse: the agent leaves steps unmeasured when reading the
// allocator would cost more than its budget. The H200 leak with two steps of
// every five dropped is projected as early, in steps, as with every step:
// spans count steps, not levels (under the agent on the H200 a span of 200
// levels first held enough at step 388, where every-step levels are
// projected at 259).
func TestRecordedLeakSparse(t *testing.T) {
	r, lv := readRecording(t, "leak")
	first := func(levels []Level) int {
		for n := 10; n <= len(levels); n++ {
			if pr := Project(levels[:n], r.CapBytes, Default()); pr.Growing {
				return levels[n-1].Step
			}
		}
		return -1
	}
	var sparse []Level
	for _, l := range lv {
		if l.Step%5 != 1 && l.Step%5 != 3 {
			sparse = append(sparse, l)
		}
	}
	all, some := first(lv), first(sparse)
	if all < 0 || some < 0 || some > all+5 {
		t.Errorf("first projected at step %d with every step, %d with 3 of 5", all, some)
	}
	// Read at one step in k, it is projected at most a read or two later:
	// windows count steps too.
	for _, k := range []int{7, 14, 25} {
		if at := first(readEvery(lv, k)); at < 0 || at > all+2*k {
			t.Errorf("first projected at step %d with every step, %d with one in %d", all, at, k)
		}
	}
}
