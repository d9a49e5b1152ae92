package analyze

import (
	"fmt"
	"strings"
)

// fit_plan.go: the ways to run a step of a given size within a memory
// budget, each replayed (fit_predict.go) to its peak, with what it costs.

// Plan kinds.
const (
	PlanAsIs        = "as_is"
	PlanMicroBatch  = "micro_batch"
	PlanCheckpoint  = "checkpoint"
	PlanBoth        = "micro_batch_checkpoint"
	PlanOptimizer8  = "optimizer_8bit"
	PlanExpandable  = "expandable_segments"
	fitSafetyMargin = 0.05 // the replay's error held out on the H200 is below 3% (docs/fit.md)
	// fitReservedError is how far above the allocator model's reserved peak
	// the capped allocator's came on the H200 among plans that fit: +4.5% at
	// most (docs/fit.md, "Final plans"). A plan whose reserved peak is within
	// it of the safe limit rests on where the allocator places blocks: one
	// such ran out of memory with its allocated peak 5% under the budget.
	fitReservedError  = 0.05
	expandableSetting = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
)

// FitPlan is one way to run the step.
type FitPlan struct {
	Kind      string        `json:"kind"`
	Title     string        `json:"title"` // "micro-batch 8 × 2 accumulation"
	Variant   FitVariant    `json:"variant"`
	Predicted FitPrediction `json:"predicted"`
	// Checkpointed are the blocks recomputed in backward, and what each gives back.
	Checkpointed []FitModule `json:"checkpointed,omitempty"`
	// ExtraTime is the estimated extra step time, as a share of a step
	// (recomputing the checkpointed blocks' forward).
	ExtraTime float64 `json:"extra_time,omitempty"`
	Cost      string  `json:"cost"`
	// Foreign names what the plan needs outside PyTorch ("bitsandbytes").
	Foreign string `json:"foreign,omitempty"`
	// Setting is an environment setting the plan needs.
	Setting string `json:"setting,omitempty"`
	// plain is the reserved peak replayed without a cap (for a variant
	// tried again with expandable segments: the peak without them).
	plain int64
}

// FitAnswer is the plans for a size and a budget.
type FitAnswer struct {
	Model  *FitModel     `json:"model"`
	Target FitSize       `json:"target"`
	Budget int64         `json:"budget"`
	AsIs   FitPrediction `json:"as_is"`
	// Fits says whether the step fits as it is, with the safety margin.
	Fits bool `json:"fits"`
	// SafetyMargin is the share of the budget kept free for the prediction's error.
	SafetyMargin float64 `json:"safety_margin"`
	// Plans are the ways that fit, the cheapest first.
	Plans []FitPlan `json:"plans"`
	Notes []string  `json:"notes,omitempty"`
}

// PlanFor answers for target within budget (the memory the allocator may
// reserve: the device's, less what CUDA and libraries hold, or a cap).
func (m *FitModel) PlanFor(target FitSize, budget int64) *FitAnswer {
	a := &FitAnswer{Model: m, Target: target, Budget: budget, SafetyMargin: fitSafetyMargin, Plans: []FitPlan{}}
	a.AsIs = m.Predict(target, FitVariant{}, 0)
	if p, ok := m.try(target, budget, FitVariant{}); ok && !p.Variant.Expandable {
		a.Fits = true
		p.Kind, p.Title, p.Cost = PlanAsIs, "as it is", "none"
		a.Plans = append(a.Plans, p)
	}
	if !a.Fits {
		a.addExpandable(target, budget)
		a.addMicroBatch(target, budget)
		a.addCheckpoint(target, budget)
		a.addOptimizer8bit(target, budget)
	}
	for i := range a.Plans {
		if p := &a.Plans[i]; p.Variant.Expandable && p.Kind != PlanExpandable {
			p.Title += ", expandable segments"
			p.Setting = expandableSetting
			p.Cost += fmt.Sprintf("; expandable segments because its reserved peak without them (%s) comes within "+
				"the allocator model's error (%.0f%%) of the budget less its margin, where fragmentation decides",
				fb(p.plain), 100*fitReservedError)
		}
	}
	a.notes(target)
	return a
}

// try replays v under the budget less the safety margin. A plan that fits
// only by less than the model's reserved error is tried again with
// expandable segments, which take fragmentation out; the plan returned is
// the variant that fits.
func (m *FitModel) try(s FitSize, budget int64, v FitVariant) (FitPlan, bool) {
	p, ok := m.tryAs(s, budget, v)
	if !ok || v.Expandable || float64(p.plain)*(1+fitReservedError) <= float64(budget)*(1-fitSafetyMargin) {
		return p, ok
	}
	plain := p.plain
	v.Expandable = true
	p, ok = m.tryAs(s, budget, v)
	p.plain = plain
	return p, ok
}

// tryAs is try for v as it is.
func (m *FitModel) tryAs(s FitSize, budget int64, v FitVariant) (FitPlan, bool) {
	limit := int64(float64(budget) * (1 - fitSafetyMargin))
	p := m.Predict(s, v, limit)
	ok := !p.OutOfMemory && p.Allocated <= limit && p.Reserved <= limit
	var plain int64
	if ok {
		p = m.Predict(s, v, 0) // the peaks it will reach with room to spare
		plain = p.Reserved
		// Past the budget with room to spare, the plan relies on the
		// allocator giving cached segments back at the cap; the real one then
		// still fails when no free piece holds the largest request (the
		// H200's llama plan at 3.41 GiB allocated under 3.74 GiB failed
		// asking 250 MiB), so that request must fit beside the peak too.
		if !v.Expandable && p.Reserved > budget && p.Allocated+p.Transient > limit {
			ok = false
		}
		p.Reserved = min(p.Reserved, limit)
	}
	return FitPlan{Variant: v, Predicted: p, plain: plain}, ok
}

// addExpandable: when what tensors hold fits and only the allocator's
// segments do not, expandable segments take back the margin.
func (a *FitAnswer) addExpandable(s FitSize, budget int64) {
	v := FitVariant{Expandable: true}
	p, ok := a.Model.try(s, budget, v)
	if !ok {
		return
	}
	p.Kind, p.Title = PlanExpandable, "expandable segments"
	p.Setting = expandableSetting
	p.Cost = fmt.Sprintf("none measurable; the fragmentation margin (%s as it is) is what does not fit", fb(a.AsIs.Margin))
	a.Plans = append(a.Plans, p)
}

// microBatches are the micro-batches that divide batch, largest first.
func microBatches(batch int64) []int64 {
	var out []int64
	for m := batch - 1; m >= 1; m-- {
		if batch%m == 0 {
			out = append(out, m)
		}
	}
	return out
}

func (a *FitAnswer) addMicroBatch(s FitSize, budget int64) {
	if p, ok := a.Model.largestMicroBatch(s, budget, FitVariant{}); ok {
		v := p.Variant
		p.Kind, p.Title = PlanMicroBatch, fmt.Sprintf("micro-batch %d × %d accumulation", v.MicroBatch, v.Accumulation)
		p.Cost = fmt.Sprintf("the same samples per optimizer step in %d forward/backward passes of %d; "+
			"smaller matrix products may use the GPU less well (not estimated)", v.Accumulation, v.MicroBatch)
		a.Plans = append(a.Plans, p)
	}
}

// largestMicroBatch is v with the largest micro-batch dividing the batch that fits.
func (m *FitModel) largestMicroBatch(s FitSize, budget int64, v FitVariant) (FitPlan, bool) {
	for _, mb := range microBatches(s.Batch) {
		v.MicroBatch, v.Accumulation = mb, s.Batch/mb
		if p, ok := m.try(s, budget, v); ok {
			return p, true
		}
	}
	return FitPlan{}, false
}

// addCheckpoint: the fewest blocks, from the first, whose checkpointing fits;
// with no such number at the full batch, the largest micro-batch that fits
// with them.
func (a *FitAnswer) addCheckpoint(s FitSize, budget int64) {
	m := a.Model
	if len(m.Modules) == 0 {
		return
	}
	if p, ok := a.fewestBlocks(s, budget, FitVariant{}); ok {
		p.Kind = PlanCheckpoint
		a.Plans = append(a.Plans, p)
		return
	}
	for _, mb := range microBatches(s.Batch) {
		if p, ok := a.fewestBlocks(s, budget, FitVariant{MicroBatch: mb, Accumulation: s.Batch / mb}); ok {
			p.Kind = PlanBoth
			p.Title = fmt.Sprintf("micro-batch %d × %d accumulation, %s", mb, s.Batch/mb, p.Title)
			a.Plans = append(a.Plans, p)
			return
		}
	}
}

// fewestBlocks finds the smallest k for which checkpointing the first k blocks fits under v.
func (a *FitAnswer) fewestBlocks(s FitSize, budget int64, v FitVariant) (FitPlan, bool) {
	m := a.Model
	lo, hi := 1, len(m.Modules)
	with := func(k int) FitVariant {
		w := v
		w.Checkpoint = make([]int, k)
		for i := range w.Checkpoint {
			w.Checkpoint[i] = i
		}
		return w
	}
	if _, ok := m.try(s, budget, with(hi)); !ok {
		return FitPlan{}, false
	}
	for lo < hi { // more blocks never need more memory
		mid := (lo + hi) / 2
		if _, ok := m.try(s, budget, with(mid)); ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	p, _ := m.try(s, budget, with(lo))
	a.describeCheckpoint(&p, lo)
	return p, true
}

func (a *FitAnswer) describeCheckpoint(p *FitPlan, k int) {
	m := a.Model
	var saved, all int64
	for i, b := range m.Modules {
		all += b.Saved
		if i < k {
			saved += b.Saved
			p.Checkpointed = append(p.Checkpointed, b)
		}
	}
	p.Title = "checkpointing of " + blockRange(p.Checkpointed)
	if all > 0 {
		p.ExtraTime = m.ForwardShare * float64(saved) / float64(all)
	}
	p.Cost = fmt.Sprintf("recomputes the forward of %d of %d blocks in backward: about +%.0f%% step time "+
		"(the forward is %.0f%% of a step in the trace)", k, len(m.Modules), 100*p.ExtraTime, 100*m.ForwardShare)
}

// blockRange names blocks as "h.0–h.7" when they are a run, else by list.
func blockRange(bs []FitModule) string {
	if len(bs) == 0 {
		return ""
	}
	if len(bs) == 1 {
		return bs[0].Short
	}
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Short
	}
	if len(bs) > 2 {
		return names[0] + "–" + names[len(names)-1]
	}
	return strings.Join(names, ", ")
}

func (a *FitAnswer) addOptimizer8bit(s FitSize, budget int64) {
	if a.Model.State == 0 {
		return
	}
	p, ok := a.Model.try(s, budget, FitVariant{Optimizer8bit: true})
	title := "8-bit optimizer state"
	if !ok && len(a.Plans) == 0 {
		// Nothing in PyTorch fits: 8-bit state with the largest micro-batch that then fits.
		if p, ok = a.Model.largestMicroBatch(s, budget, FitVariant{Optimizer8bit: true}); ok {
			title = fmt.Sprintf("8-bit optimizer state, micro-batch %d × %d accumulation", p.Variant.MicroBatch,
				p.Variant.Accumulation)
		}
	}
	if !ok {
		return
	}
	p.Kind, p.Title = PlanOptimizer8, title
	p.Foreign = "bitsandbytes (bnb.optim.AdamW8bit): not part of PyTorch"
	p.Cost = fmt.Sprintf("optimizer state %s -> %s; 8-bit state changes the training's numerics slightly",
		fb(a.Model.State), fb(a.Model.State/4))
	a.Plans = append(a.Plans, p)
}

// notes says what the answer assumes.
func (a *FitAnswer) notes(s FitSize) {
	a.Notes = append(a.Notes, a.Model.Notes...)
	if s.Seq != a.Model.Recorded.Seq {
		a.Notes = append(a.Notes, "a longer sequence is taken to grow memory in proportion (fused attention: "+
			"SDPA, flash); attention that materialises its scores grows with the square of the length")
	}
	if r := s.tokens() / a.Model.Recorded.tokens(); r > 8 {
		a.Notes = append(a.Notes, fmt.Sprintf("%.0f× the recorded tokens: the model was checked to 8× (docs/fit.md); "+
			"record a larger size to confirm", r))
	}
	if len(a.Plans) == 0 {
		a.Notes = append(a.Notes, "nothing fits: shard the model and its optimizer state over more GPUs (FSDP, ZeRO), "+
			"or train fewer parameters (LoRA)")
	}
}
