package analyze

import (
	"strings"
	"testing"
)

const mib = 1 << 20

// trainRun is n training steps holding `held` between steps, each step's peak
// perTok bytes per token above it, the last step (an OOM) with inputs last.
func trainRun(n int, held, perTok int64, shape, last []int64) []RoadStep {
	var out []RoadStep
	for i := range n {
		s := shape
		if i == n-1 {
			s = last
		}
		st := RoadStep{Step: int64(i), UnixMS: int64(1000 * i), DurUS: 40000, Allocated: held, Reserved: held + 512*mib,
			Peak: held + perTok*tokens([][]int64{s}), Inputs: [][]int64{s}, Phase: "train"}
		if i == n-1 {
			st.OOM, st.Peak = true, held+3*mib*1024
		}
		out = append(out, st)
	}
	return out
}

func TestRoadChangeNamesALongerBatch(t *testing.T) {
	steps := trainRun(40, 1200*mib, 2*mib, []int64{8, 256}, []int64{16, 1024})
	c, ok := RoadChangeOf(steps, 9<<30, 4<<30)
	if !ok || c.Kind != "input" {
		t.Fatalf("change = %+v, %v; want input", c, ok)
	}
	if c.Step != 39 || !c.OOM || c.From != 0 || c.To != 38 || c.Tokens != 16384 || c.BaseTokens != 2048 {
		t.Errorf("change = %+v", c)
	}
	if c.BasePerToken != 2*mib || c.Needed != 2*mib*16384 {
		t.Errorf("per token %d, needed %d; want 2 MiB, 32 GiB", c.BasePerToken, c.Needed)
	}
	for _, want := range []string{"step 39: inputs 16 × 1024 (16,384 tokens), 8.0× the tokens of steps 0–38 (8 × 256)",
		"at their 2.00 MiB per token above what was held between steps, its tokens need 32.00 GiB: 33.17 GiB with the 1.17 GiB held at its start",
		"against the 9.00 GiB the process could use"} {
		if !strings.Contains(c.Text, want) {
			t.Errorf("text %q lacks %q", c.Text, want)
		}
	}
}

func TestRoadChangeNamesSlowGrowth(t *testing.T) {
	// saw-tooth peaks (variable lengths) over a level that rises 8 MiB a step
	var steps []RoadStep
	for i := range 300 {
		seq := int64(128 + 64*(i%5))
		held := 2000*mib + int64(i)*8*mib
		steps = append(steps, RoadStep{Step: int64(i), Allocated: held, Peak: held + seq*mib, Inputs: [][]int64{{8, seq}}, Phase: "train"})
	}
	steps[299].OOM = true
	c, ok := RoadChangeOf(steps, 8<<30, 1*mib)
	if !ok || c.Kind != "growth" {
		t.Fatalf("change = %+v, %v; want growth", c, ok)
	}
	if c.GrowthPerStep != 8*mib || c.GrowthSteps != 299 {
		t.Errorf("growth %d steps at %d/step; want 299 (all the steps before the failing one) at 8 MiB", c.GrowthSteps, c.GrowthPerStep)
	}
	if !strings.Contains(c.Text, "memory had been growing for 299 steps at 8.00 MiB/step") {
		t.Errorf("text %q", c.Text)
	}
}

func TestRoadChangeHealthyVariableLengthsAndEvalAreNotGrowth(t *testing.T) {
	var steps []RoadStep
	for i := range 121 {
		seq := int64(64 + (i*37)%448) // variable lengths, no trend
		ph := "train"
		if i%20 == 19 {
			ph, seq = "eval", 512
		}
		held := 3000*mib + int64(i%4)*64*mib // gradient accumulation's saw-tooth
		steps = append(steps, RoadStep{Step: int64(i), Allocated: held, Peak: held + seq*2*mib, Inputs: [][]int64{{4, seq}}, Phase: ph})
	}
	c, ok := RoadChangeOf(steps, 80<<30, 0)
	if !ok || c.Kind != "none" {
		t.Fatalf("change = %+v, %v; want none", c, ok)
	}
	if !strings.HasPrefix(c.Text, "training step 114 was like training steps 0–113: inputs 4 × ") {
		t.Errorf("text %q", c.Text)
	}
}

func TestRoadChangeNeedsStepsToCompare(t *testing.T) {
	if _, ok := RoadChangeOf(trainRun(3, mib, 1, []int64{1, 1}, []int64{9, 9}), 0, 0); ok {
		t.Error("2 steps before the failing one: want no change")
	}
	if _, ok := RoadChangeOf(nil, 0, 0); ok {
		t.Error("no steps: want no change")
	}
}

func TestSetRoadAmendsTheOOMFinding(t *testing.T) {
	r := &Result{OOMs: []OOM{{Requested: 4 << 30, Cap: 9 << 30}},
		Findings: []Finding{{Kind: KindOOM, Title: "CUDA out of memory: 4.00 GiB requested"}}}
	steps := trainRun(40, 1200*mib, 2*mib, []int64{8, 256}, []int64{16, 1024})
	// given out of order, as a daemon may merge them
	steps[3], steps[20] = steps[20], steps[3]
	r.SetRoad(steps, 0)
	if r.Road == nil || r.Road.Total != 40 || len(r.Road.Steps) != 40 || r.Road.Cap != 9<<30 {
		t.Fatalf("road = %+v", r.Road)
	}
	if r.Road.Steps[3].Step != 3 {
		t.Errorf("steps not in order: %d at 3", r.Road.Steps[3].Step)
	}
	f := r.Findings[0]
	if !strings.Contains(f.Title, "; step 39: inputs 16 × 1024") || f.Evidence.Numbers["road_tokens"] != 16384 {
		t.Errorf("finding = %q %v", f.Title, f.Evidence.Numbers)
	}
}

func TestDownsampleRoadKeepsTheTailThePeaksAndTheWindows(t *testing.T) {
	var steps []RoadStep
	for i := range 100_000 {
		steps = append(steps, RoadStep{Step: int64(i), Peak: int64(i % 1000), Recorded: i == 50_001})
	}
	steps[777].OOM = true
	out := downsampleRoad(steps)
	if len(out) > RoadPoints+1 || len(out) < RoadPoints-1 {
		t.Fatalf("%d points; want about %d", len(out), RoadPoints)
	}
	if out[len(out)-1].Step != 99_999 || out[len(out)-RoadTail].Step != 100_000-RoadTail {
		t.Error("the tail is not whole")
	}
	var oom, rec bool
	for i, s := range out {
		oom = oom || (s.OOM && s.Step == 777)
		rec = rec || s.Recorded
		if i > 0 && s.Step <= out[i-1].Step {
			t.Fatalf("not in order at %d", i)
		}
	}
	if !oom || !rec {
		t.Errorf("kept the OOM step: %v, a recorded bucket: %v", oom, rec)
	}
}

// TestRoadChangeWithStepsNotMeasured: an agent that reads the allocator
// every third step (its budget) leaves levels of -1 between; the change is
// found from the measured steps, each against the last measured level.
func TestRoadChangeWithStepsNotMeasured(t *testing.T) {
	steps := trainRun(40, 1200*mib, 2*mib, []int64{8, 256}, []int64{16, 1024})
	for i := range steps[:39] {
		if i%3 != 0 {
			steps[i].Allocated, steps[i].Reserved, steps[i].Peak = -1, -1, -1
		}
	}
	c, ok := RoadChangeOf(steps, 9<<30, 4<<30)
	if !ok || c.Kind != "input" || c.BasePerToken != 2*mib || c.StartAllocated != 1200*mib {
		t.Fatalf("change = %+v, %v", c, ok)
	}
}

// TestRoadChangeWithInputsOfReadStepsOnly: an agent whose hooks alone pass
// its budget (short steps) keeps inputs and levels at every 16th step only;
// the longer batch is found against those, and the text says how many of
// the steps compared had their inputs kept.
func TestRoadChangeWithInputsOfReadStepsOnly(t *testing.T) {
	steps := trainRun(400, 1200*mib, 2*mib, []int64{8, 256}, []int64{16, 1024})
	for i := range steps[:399] {
		if i%16 != 0 {
			steps[i].Allocated, steps[i].Reserved, steps[i].Peak, steps[i].Inputs = -1, -1, -1, nil
		}
	}
	c, ok := RoadChangeOf(steps, 9<<30, 4<<30)
	if !ok || c.Kind != "input" || c.BaseTokens != 2048 || c.Tokens != 16384 || c.BasePerToken != 2*mib {
		t.Fatalf("change = %+v, %v", c, ok)
	}
	want := "8.0× the tokens of steps 0–384 (8 × 256; inputs kept at 25 of those 385 steps)"
	if !strings.Contains(c.Text, want) {
		t.Errorf("change text %q\nwant it to hold %q", c.Text, want)
	}
	steps[398].Inputs = [][]int64{{16, 1024}} // a step between reads had as long a batch: no change of input
	if c, _ := RoadChangeOf(steps, 9<<30, 4<<30); c.Kind == "input" {
		t.Errorf("change = %+v; the longer batch had come before", c)
	}
}

// TestSetRoadNamesTheHolderThatGrew: a growth, and the agent's walk found a
// cache growing at the failure: the change names it.
func TestSetRoadNamesTheHolderThatGrew(t *testing.T) {
	var steps []RoadStep
	for i := range 100 {
		held := 2000*mib + int64(i)*16*mib
		steps = append(steps, RoadStep{Step: int64(i), Allocated: held, Peak: held + 300*mib, Inputs: [][]int64{{8, 128}}, Phase: "train"})
	}
	steps[99].OOM = true
	r := &Result{Findings: []Finding{{Kind: KindOOM, Title: "CUDA out of memory"}},
		Tensors: &Tensors{Groups: []TensorGroup{{Name: "model.transformer.h.*.attn.c_attn.weight", Kind: "parameter", Bytes: 900 * mib},
			{Name: "_CACHE[*]", Kind: "global", Bytes: 1500 * mib, Tensors: 97, File: "train.py", Line: 12, Growing: true}}}}
	r.SetRoad(steps, 8<<30)
	c := r.Road.Change
	if c == nil || c.Kind != "growth" || c.Holder != "_CACHE[*]" {
		t.Fatalf("change = %+v", c)
	}
	if !strings.Contains(r.Findings[0].Title, "memory had been growing for 99 steps at 16.00 MiB/step") ||
		strings.Contains(r.Findings[0].Title, "more steps") ||
		!strings.HasSuffix(r.Findings[0].Title, "; what grew: _CACHE[*] (1.46 GiB in 97 tensors at the failure, train.py:12)") {
		t.Errorf("finding %q", r.Findings[0].Title)
	}
}
