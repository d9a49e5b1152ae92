package analyze_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// whatifRuns are the H200 measurements beside the whatif recordings
// (examples/record/record_whatif.py: GPT-2 6 layers, seq 512, bf16
// autocast, AdamW, two steps per process; batches 12 and 16 never recorded).
func whatifRuns(t *testing.T) map[int64][2]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(exampleDir, "whatif", "whatif.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Batch        int64 `json:"batch"`
			MaxAllocated int64 `json:"max_allocated"`
			MaxReserved  int64 `json:"max_reserved"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[int64][2]int64{}
	for _, r := range doc.Runs {
		out[r.Batch] = [2]int64{r.MaxAllocated, r.MaxReserved}
	}
	return out
}

func fitModelOf(t *testing.T, path string, rec analyze.FitSize) *analyze.FitModel {
	t.Helper()
	r, err := analyze.Run(path, analyze.Options{KeepTrace: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.FitModel(rec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFitOneSnapshotHeldOut: from one recorded size, the peaks at 2-8x that
// size, measured in runs the model never saw, within 5% (allocated and
// reserved).
func TestFitOneSnapshotHeldOut(t *testing.T) {
	runs := whatifRuns(t)
	for _, rec := range []int64{2, 4} {
		m := fitModelOf(t, filepath.Join(exampleDir, "whatif", "whatif_bs"+itoa(rec)+".pickle"), analyze.FitSize{Batch: rec, Seq: 512})
		checked := 0
		for b, want := range runs {
			if b <= rec || b > 8*rec {
				continue
			}
			p := m.Predict(analyze.FitSize{Batch: b, Seq: 512}, analyze.FitVariant{}, 0)
			ea, er := relErr(p.Allocated, want[0]), relErr(p.Reserved, want[1])
			t.Logf("bs%d -> bs%d: allocated %d vs %d (%+.2f%%), reserved %d vs %d (%+.2f%%)", rec, b, p.Allocated, want[0], 100*ea, p.Reserved, want[1], 100*er)
			if abs64f(ea) > 0.05 || abs64f(er) > 0.05 {
				t.Errorf("bs%d -> bs%d: off by more than 5%%", rec, b)
			}
			checked++
		}
		if checked < 2 {
			t.Fatalf("bs%d: only %d held-out sizes", rec, checked)
		}
	}
}

// TestFitAtRecordedSize: the replay at the recorded size gives back what
// the run measured (the allocator model's own error).
func TestFitAtRecordedSize(t *testing.T) {
	runs := whatifRuns(t)
	m := fitModelOf(t, filepath.Join(exampleDir, "whatif", "whatif_bs8.pickle"), analyze.FitSize{Batch: 8, Seq: 512})
	p := m.AtRecorded
	if e := relErr(p.Allocated, runs[8][0]); abs64f(e) > 0.01 {
		t.Errorf("allocated %d vs measured %d", p.Allocated, runs[8][0])
	}
	if e := relErr(p.Reserved, runs[8][1]); abs64f(e) > 0.03 {
		t.Errorf("reserved %d vs measured %d", p.Reserved, runs[8][1])
	}
	if m.State == 0 || m.Gradients == 0 || m.PerToken == 0 {
		t.Errorf("classes not found: %+v", m)
	}
}

func relErr(got, want int64) float64 { return float64(got)/float64(want) - 1 }

func abs64f(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestFitReplaysTheFixtures: replayed at the size it ran at, each shared
// fixture's trace gives back the peaks torch measured in that run
// (max_memory_allocated and max_memory_reserved, in the .json beside it):
// the allocator model's own error. gpt2_train: GPT-2 6 layers, 4 steps;
// llama_lora_gc: Llama-style LoRA with gradient checkpointing, 3 steps.
func TestFitReplaysTheFixtures(t *testing.T) {
	for _, c := range []struct {
		name string
		size analyze.FitSize
	}{{"gpt2_train", analyze.FitSize{Batch: 8, Seq: 512}}, {"llama_lora_gc", analyze.FitSize{Batch: 4, Seq: 1024}}} {
		path := pathOf(t, c.name)
		need(t, path) // skips (or fails in CI) when the fixtures are missing
		b, err := os.ReadFile(strings.TrimSuffix(path, ".pickle") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var run struct {
			MaxAllocated int64 `json:"max_allocated"`
			MaxReserved  int64 `json:"max_reserved"`
		}
		if err := json.Unmarshal(b, &run); err != nil {
			t.Fatal(err)
		}
		p := fitModelOf(t, path, c.size).AtRecorded
		ea, er := relErr(p.Allocated, run.MaxAllocated), relErr(p.Reserved, run.MaxReserved)
		t.Logf("%s: allocated %+.2f%%, reserved %+.2f%%", c.name, 100*ea, 100*er)
		if abs64f(ea) > 0.01 || abs64f(er) > 0.01 {
			t.Errorf("%s: replayed %d allocated and %d reserved, torch measured %d and %d", c.name, p.Allocated, p.Reserved, run.MaxAllocated, run.MaxReserved)
		}
	}
}
