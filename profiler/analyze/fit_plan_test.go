package analyze_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// TestFitPlansStayInBudget: at 4x the recorded batch under a budget the step
// does not fit, every plan's predicted peaks are within the budget less the
// safety margin, and the micro-batch plan keeps the effective batch.
func TestFitPlansStayInBudget(t *testing.T) {
	m := fitModelOf(t, filepath.Join(exampleDir, "whatif", "whatif_bs2.pickle"), analyze.FitSize{Batch: 2, Seq: 512})
	const budget = 4 << 30
	a := m.PlanFor(analyze.FitSize{Batch: 8, Seq: 512}, budget)
	if a.Fits || a.AsIs.Reserved <= budget {
		t.Fatalf("batch 8 should not fit 4 GiB: %+v", a.AsIs)
	}
	var micro bool
	for _, p := range a.Plans {
		if p.Predicted.Reserved > int64(budget*(1-a.SafetyMargin)) || p.Predicted.OutOfMemory {
			t.Errorf("%s: predicted %d reserved over the budget", p.Title, p.Predicted.Reserved)
		}
		if p.Kind == analyze.PlanMicroBatch {
			micro = true
			if p.Variant.MicroBatch*p.Variant.Accumulation != 8 {
				t.Errorf("%s: effective batch %d", p.Title, p.Variant.MicroBatch*p.Variant.Accumulation)
			}
		}
	}
	if !micro {
		t.Errorf("no micro-batch plan: %+v", a.Plans)
	}
	// Accumulation keeps the gradients through every micro-step: a micro-batch
	// of 2 in 4 steps needs more than one step of 2 alone.
	acc := m.Predict(analyze.FitSize{Batch: 8, Seq: 512}, analyze.FitVariant{MicroBatch: 2, Accumulation: 4}, 0)
	if acc.Allocated <= m.AtRecorded.Allocated {
		t.Errorf("accumulation %d not above one step of the micro-batch %d", acc.Allocated, m.AtRecorded.Allocated)
	}
}

// TestFitFromAgentOOM: the agent's snapshot at an out-of-memory error (no
// trace, its tensors named) gives the size it failed at from the shapes,
// the blocks to checkpoint, and plans that the finding names.
func TestFitFromAgentOOM(t *testing.T) {
	path := filepath.Join(exampleDir, "oom", "lora_gpt2.pickle")
	m := fitModelOf(t, path, analyze.FitSize{})
	if m.Recorded != (analyze.FitSize{Batch: 4, Seq: 1024}) || m.RecordedSource != "shapes" {
		t.Errorf("recorded %v from %s, want 4x1024 from the shapes", m.Recorded, m.RecordedSource)
	}
	if len(m.Modules) != 12 || !strings.HasSuffix(m.Modules[0].Name, "transformer.h.0") || m.Modules[0].Saved <= m.Modules[0].Kept {
		t.Errorf("modules: %+v", m.Modules)
	}
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var oom *analyze.Finding
	for i := range r.Findings {
		if r.Findings[i].Kind == analyze.KindOOM {
			oom = &r.Findings[i]
		}
	}
	if oom == nil || len(oom.Plans) == 0 || !strings.HasPrefix(oom.Fix, "fits in ") {
		t.Fatalf("the OOM finding names no plan: %+v", oom)
	}
	for _, p := range oom.Plans {
		if p.Reserved > oom.Evidence.Numbers["process_cap_at_most"] {
			t.Errorf("%s: %d over the cap", p.Title, p.Reserved)
		}
	}
}

// TestFitTooBigNothingFits: a model whose weights, gradients and AdamW state
// alone pass its cap (0.8 B parameters under 6 GiB, out of memory in its
// first forward) gets no plan: the unrecorded optimizer step is counted.
func TestFitTooBigNothingFits(t *testing.T) {
	m := fitModelOf(t, filepath.Join(exampleDir, "oom", "too_big.pickle"), analyze.FitSize{Batch: 4, Seq: 512})
	a := m.PlanFor(m.Recorded, 6<<30)
	if len(a.Plans) != 0 {
		t.Errorf("plans for a model that cannot fit: %+v", a.Plans)
	}
	if m.Unrecorded.State < 3*m.Fixed/2 || m.Unrecorded.Gradient < m.Fixed/2 {
		t.Errorf("optimizer state not estimated: %+v", m.Unrecorded)
	}
}

// TestFitExpandableWhenFragmentationIsTheMargin: GPT-2 small-shaped at 8x
// its recorded batch (the H200 recording) needs 12.4 GiB allocated and 13.9
// GiB reserved; under 13.6 GiB the allocator's segments, not the tensors, do
// not fit, and expandable segments is a plan (predicted, not run on the H200).
func TestFitExpandableWhenFragmentationIsTheMargin(t *testing.T) {
	m := fitModelOf(t, filepath.Join(h200Dir, "fit_gpt2s_bs2.pickle"), analyze.FitSize{Batch: 2, Seq: 512})
	a := m.PlanFor(analyze.FitSize{Batch: 16, Seq: 512}, 136<<30/10)
	if a.Fits {
		t.Fatalf("fits as it is: %+v", a.AsIs)
	}
	for _, p := range a.Plans {
		if p.Kind == analyze.PlanExpandable {
			if p.Setting != "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" || p.Predicted.Reserved > 136<<30/10 {
				t.Errorf("plan %+v", p)
			}
			return
		}
	}
	t.Errorf("no expandable segments plan: %+v", a.Plans)
}
