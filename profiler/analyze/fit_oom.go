package analyze

import (
	"fmt"
	"strings"
)

// fit_oom.go: an out-of-memory finding says which plans would have fitted
// (fit_plan.go), replayed from the snapshot itself at the size that failed
// and under the memory the process could use.

// FitSuggestion is one plan as a finding carries it.
type FitSuggestion struct {
	Kind      string `json:"kind"`
	Title     string `json:"title"`
	Allocated int64  `json:"peak_allocated"`
	Reserved  int64  `json:"peak_reserved"`
	Cost      string `json:"cost"`
}

// fitFindingEvents bounds the trace an OOM finding plans from: the plans
// take up to ~25 replays, about 5 ms each for 34,000 events on one core
// (gpt2_12l_python_stacks), so this bound keeps them under a second; an
// analysis must stay fast on a trace of millions of events. vramscope fit
// plans from any length.
const fitFindingEvents = 250_000

// oomLimit is the memory the process could use when it failed: the cap
// when one refused it, else what it had reserved plus what the device had free.
func oomLimit(o OOM) int64 {
	switch {
	case o.Cap > 0:
		return o.Cap
	case o.CapAtMost > 0:
		return o.CapAtMost
	}
	return o.Reserved + int64(o.DeviceFree)
}

// oomPlan adds to the last OOM's finding the plans that fit its limit.
func (dg *devDiag) oomPlan(f *Finding, od oomDiag, last bool) {
	ft := dg.d.fit
	if ft == nil || !last || ft.oomAt < 0 || len(ft.ev) > fitFindingEvents {
		return
	}
	switch f.Cause {
	case KindUnboundedCache, KindLeak:
		return // a fix of the code, not of the step's size
	}
	m := &FitModel{File: dg.r.File, trace: ft, Recorded: ft.recorded, RecordedSource: "shapes"}
	relative := m.Recorded.Batch <= 1
	if relative { // the size is unknown: plan in shares of it
		m.Recorded, m.RecordedSource = FitSize{Batch: 8, Seq: 1}, "unknown"
	}
	m.describe()
	m.modules()
	a := m.PlanFor(m.Recorded, oomLimit(od.o))
	var said []string
	for _, p := range a.Plans {
		if p.Kind == PlanAsIs || p.Kind == PlanOptimizer8 {
			continue
		}
		title := p.Title
		if relative && p.Variant.MicroBatch > 0 {
			title = strings.Replace(title, fmt.Sprintf("micro-batch %d", p.Variant.MicroBatch),
				fmt.Sprintf("micro-batch 1/%d of the batch", p.Variant.Accumulation), 1)
		}
		f.Plans = append(f.Plans, FitSuggestion{Kind: p.Kind, Title: title, Allocated: p.Predicted.Allocated,
			Reserved: p.Predicted.Reserved, Cost: p.Cost})
		said = append(said, fmt.Sprintf("%s (%s)", title, fb(p.Predicted.Reserved)))
	}
	if len(said) == 0 {
		return
	}
	f.Fix = fmt.Sprintf("fits in %s with %s — predicted from this snapshot (vramscope fit); ",
		fb(oomLimit(od.o)), strings.Join(said, ", or ")) + f.Fix
}
