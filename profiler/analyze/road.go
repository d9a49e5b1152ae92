package analyze

// road.go: the road to an out-of-memory error. The agent measures every step
// of a run (allocated, reserved and peak bytes at its end, its inputs'
// shapes); the daemon keeps them beside a snapshot and hands them here. The
// road is what the report draws over the run, and what changed at the step
// that failed — a larger input than the steps before, or memory that had
// been growing step after step — goes into the out-of-memory finding.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/forecast"
)

// RoadStep is one step of a run as the agent measured it (the fields of the
// daemon's api.StepLevel, which converts to it).
type RoadStep struct {
	Step      int64     `json:"step"`
	UnixMS    int64     `json:"unix_ms"`
	DurUS     int64     `json:"dur_us"`
	Allocated int64     `json:"allocated"`
	Reserved  int64     `json:"reserved"`
	Peak      int64     `json:"peak"`
	Inputs    [][]int64 `json:"inputs,omitempty"`
	Phase     string    `json:"phase"`
	Recorded  bool      `json:"recorded,omitempty"`
	OOM       bool      `json:"oom,omitempty"`
	NVMLBytes int64     `json:"nvml_bytes,omitempty"`
}

// Road is the run a snapshot ends: its steps (downsampled to at most
// RoadPoints for the report, the last RoadTail kept whole), the memory the
// process could use, and what changed at the last step.
type Road struct {
	Steps []RoadStep `json:"steps"`
	// Total counts the steps measured (Steps may hold fewer).
	Total int   `json:"total"`
	Cap   int64 `json:"cap,omitempty"`
	// Change is what changed at the failing (else the last) step; nil when
	// there are too few steps to compare.
	Change *RoadChange `json:"change,omitempty"`
}

// RoadChange says what was different about the failing step.
type RoadChange struct {
	// Kind: "input" (its inputs were larger than the steps' before), "growth"
	// (memory had been growing step after step), "none" (neither).
	Kind string `json:"kind"`
	Text string `json:"text"`
	Step int64  `json:"step"`
	OOM  bool   `json:"oom,omitempty"` // the step ran out of memory (else it is the last measured)
	// The steps compared against (first and last step numbers).
	From int64 `json:"from_step"`
	To   int64 `json:"to_step"`
	// Input: the step's tokens (the product of its first input's shape) and
	// the median of the steps before; its bytes per token above the level it
	// started from, and theirs (a lower bound for a step that failed).
	Tokens           int64 `json:"tokens,omitempty"`
	BaseTokens       int64 `json:"base_tokens,omitempty"`
	PerToken         int64 `json:"per_token,omitempty"`
	BasePerToken     int64 `json:"base_per_token,omitempty"`
	Needed           int64 `json:"needed,omitempty"` // what the step would have needed at the steps' rate per token, above its start
	GrowthSteps      int   `json:"growth_steps,omitempty"`
	GrowthPerStep    int64 `json:"growth_per_step,omitempty"` // bytes per step, allocated at step end
	GrowthFrom       int64 `json:"growth_from,omitempty"`
	GrowthTo         int64 `json:"growth_to,omitempty"`
	BaseMaxPeak      int64 `json:"base_max_peak,omitempty"`
	StartAllocated   int64 `json:"start_allocated,omitempty"` // allocated at the end of the step before it
	FailingRequested int64 `json:"requested,omitempty"`
	// Holder is the growing holder the agent named at the failure, for a growth.
	Holder string `json:"holder,omitempty"`
}

const (
	// RoadPoints bounds the steps a report carries; RoadTail are the last
	// steps kept whole (the road's end is what the reader looks at).
	RoadPoints = 2000
	RoadTail   = 300
	// roadBase is how many steps before the failing one are compared with it.
	roadBase = 200
	// An input is "larger" from inputRatio times the steps' median tokens,
	// and more than any of them had (variable lengths are no change).
	inputRatio = 1.5
	// Growth counts when allocated rose by at least growthMin bytes and
	// growthShare of the cap over the run, in most steps of it.
	growthMin   = 64 << 20
	growthShare = 0.05
)

// SetRoad gives the result its road: steps as the daemon kept them (any
// order), cap the memory the process could use (0 unknown). The out-of-memory
// finding says what changed at the failing step.
func (r *Result) SetRoad(steps []RoadStep, cap int64) {
	if len(steps) == 0 {
		return
	}
	steps = append([]RoadStep(nil), steps...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Step < steps[j].Step })
	var requested int64
	if len(r.OOMs) > 0 {
		requested = r.OOMs[0].Requested
		if cap <= 0 {
			cap = r.OOMs[0].Cap
		}
	}
	road := &Road{Total: len(steps), Cap: cap, Steps: downsampleRoad(steps)}
	if c, ok := RoadChangeOf(steps, cap, requested); ok {
		var holder *TensorGroup
		if c.Kind == "growth" {
			holder = r.growingHolder(&c)
		}
		road.Change = &c
		r.amendOOM(c)
		r.growthFinding(c, holder)
	}
	r.Road = road
}

// growingHolder names, in a growth's text, the largest holder the agent's
// tensor walk found growing at the failure (many entries of one shape
// family: a cache), when there is one; it returns that holder.
func (r *Result) growingHolder(c *RoadChange) *TensorGroup {
	if r.Tensors == nil {
		return nil
	}
	for i := range r.Tensors.Groups { // largest first
		g := &r.Tensors.Groups[i]
		if !g.Growing {
			continue
		}
		c.Holder = g.Name
		when := "at the failure"
		if !c.OOM {
			when = "in this snapshot"
		}
		c.Text += fmt.Sprintf("; what grew: %s (%s in %d tensors %s", g.Name, fb(g.Bytes), g.Tensors, when)
		if file, line := g.MadeAt(); file != "" {
			c.Text += fmt.Sprintf(", %s:%d", file, line)
		}
		c.Text += ")"
		return g
	}
	return nil
}

// growthFinding: a snapshot of a run whose memory grows (the daemon's
// memory warning takes one) says so first, on the line that makes the
// holder's tensors, while the job still lives; g is the holder that grows,
// or nil.
func (r *Result) growthFinding(c RoadChange, g *TensorGroup) {
	if c.OOM || c.Kind != "growth" {
		return
	}
	f := Finding{Kind: KindMemoryGrowth, Severity: "warning", Title: strings.ToUpper(c.Text[:1]) + c.Text[1:],
		Fix: "find what keeps memory from one step to the next (a list of tensors, outputs or losses kept on the GPU, a cache " +
			"with no bound) and free it, bound it or move it to the CPU (.item(), .detach().cpu())",
		Evidence: Evidence{Numbers: map[string]int64{"road_step": c.Step, "road_growth_steps": int64(c.GrowthSteps),
			"road_growth_per_step": c.GrowthPerStep, "road_growth_from": c.GrowthFrom, "road_growth_to": c.GrowthTo}}}
	if g != nil {
		f.File, f.Line = g.MadeAt() // the growing line: where its tensors are made
		f.Fix = fmt.Sprintf("%s holds %d tensors (%s%s) and grows by about %s a step: free it, bound it (evict old "+
			"entries) or keep it on the CPU (.item(), .detach().cpu())", g.Name, g.Tensors, fb(g.Bytes), g.madeText(),
			fb(c.GrowthPerStep))
		f.Evidence.Lines = g.evidenceLines()
	}
	// First: it is why a warning's snapshot was taken, and what the editor
	// and the notebook lead with (the daemon adds its own findings after it).
	r.Findings = append([]Finding{f}, r.Findings...)
}

// amendOOM adds the change to the out-of-memory finding's title and numbers.
func (r *Result) amendOOM(c RoadChange) {
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Kind != KindOOM || !c.OOM {
			continue
		}
		f.Title += "; " + c.Text
		if f.Evidence.Numbers == nil {
			f.Evidence.Numbers = map[string]int64{}
		}
		n := f.Evidence.Numbers
		n["road_step"] = c.Step
		switch c.Kind {
		case "input":
			n["road_tokens"], n["road_base_tokens"] = c.Tokens, c.BaseTokens
			n["road_per_token"], n["road_base_per_token"] = c.PerToken, c.BasePerToken
		case "growth":
			n["road_growth_steps"], n["road_growth_per_step"] = int64(c.GrowthSteps), c.GrowthPerStep
		}
		return
	}
}

// RoadChangeOf compares the failing step (the last one marked OOM, else the
// last) with the steps of its phase before it (up to roadBase): their inputs
// all, their levels where the agent measured them. requested is the failing
// allocation's size (0 unknown). ok is false with fewer than 3 measured steps
// to compare.
func RoadChangeOf(steps []RoadStep, cap, requested int64) (RoadChange, bool) {
	fi := len(steps) - 1
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].OOM {
			fi = i
			break
		}
	}
	if fi < 0 {
		return RoadChange{}, false
	}
	f := steps[fi]
	// all: the last roadBase same-phase steps before the failing one, oldest
	// first; measured: every same-phase step before it the agent measured
	// (a growth is looked for over them all: a leak is as old as the run, and
	// the H200's leak grew for 635 steps where the last 200 said 66).
	var all, measured []int
	for i := fi - 1; i >= 0; i-- {
		s := steps[i]
		if s.Phase != f.Phase || s.OOM {
			continue
		}
		if len(all) < roadBase {
			all = append(all, i)
		}
		if s.Peak >= 0 && s.Allocated >= 0 {
			measured = append(measured, i)
		}
	}
	slices.Reverse(all)
	slices.Reverse(measured)
	// tin: the same-phase steps before the failing one whose inputs the agent
	// kept, up to roadBase (an agent whose hooks alone pass its budget, on
	// short steps, keeps the inputs of its read steps only: they reach
	// further back than all)
	var tin []int
	for i := fi - 1; i >= 0 && len(tin) < roadBase; i-- {
		if s := steps[i]; s.Phase == f.Phase && !s.OOM && tokens(s.Inputs) > 0 {
			tin = append(tin, i)
		}
	}
	slices.Reverse(tin)
	// base: the measured among all, or, when the agent read further apart
	// (short steps: run 15 read one of the 200 steps before the failing one),
	// the measured over the span whose inputs are compared
	var base []int
	if len(all) > 0 {
		from := all[0]
		if len(tin) > 0 {
			from = min(from, tin[0])
		}
		base = measured[sort.SearchInts(measured, from):]
	}
	if len(base) < 3 {
		return RoadChange{}, false
	}
	c := RoadChange{Kind: "none", Step: f.Step, OOM: f.OOM, From: steps[all[0]].Step, To: steps[all[len(all)-1]].Step,
		FailingRequested: requested}
	c.StartAllocated = max(0, heldBefore(steps, fi))
	var per []int64
	for _, i := range base {
		c.BaseMaxPeak = max(c.BaseMaxPeak, steps[i].Peak)
		if held, t := heldBefore(steps, i), tokens(steps[i].Inputs); t > 0 && held >= 0 && steps[i].Peak > held {
			per = append(per, (steps[i].Peak-held)/t)
		}
	}
	c.BasePerToken = median(per)
	var toks []int64
	maxTok := int64(0)
	for _, i := range tin {
		t := tokens(steps[i].Inputs)
		toks = append(toks, t)
		maxTok = max(maxTok, t)
	}
	c.BaseTokens = median(toks)
	c.Tokens = tokens(f.Inputs)
	if top := max(f.Peak, f.Allocated+requested); c.Tokens > 0 && top > c.StartAllocated {
		c.PerToken = (top - c.StartAllocated) / c.Tokens // a lower bound when the step failed
	}
	name := stepNamer(steps, f.Phase)
	if c.Tokens > maxTok && c.BaseTokens > 0 && float64(c.Tokens) >= inputRatio*float64(c.BaseTokens) {
		c.Kind = "input"
		c.Needed = c.BasePerToken * c.Tokens
		c.Text = inputText(steps, tin, fi, c, cap, name)
		return c, true
	}
	if g, ok := growth(steps, measured, cap); ok {
		c.Kind = "growth"
		c.GrowthSteps, c.GrowthPerStep, c.GrowthFrom, c.GrowthTo = g.steps, g.rate, g.from, g.to
		c.Text = fmt.Sprintf("memory had been growing for %d steps at %s/step (allocated at step end %s → %s)",
			g.steps, fb(g.rate), fb(g.from), fb(g.to))
		if !f.OOM && cap > 0 {
			// When it will be full is the warner's projection (the step peaks'
			// trend, less the allocator's cache), not the level at step end.
			if p := forecast.Project(ForecastLevels(steps[:fi+1]), cap, forecast.Default()); p.Growing {
				c.Text += fmt.Sprintf("; the step peaks' trend reaches the %s the process may use at step %d, %d steps after step %d",
					fb(cap), p.Step, p.StepsLeft, p.LastStep)
				if p.SecondsLeft > 0 {
					c.Text += fmt.Sprintf(" (about %.0f s)", p.SecondsLeft)
				}
			}
		}
		return c, true
	}
	c.Text = fmt.Sprintf("%s was like %s: inputs %s, their peaks at most %s", name.one(fi), name.span(all),
		shapeText(f.Inputs), fb(c.BaseMaxPeak))
	return c, true
}

// namer names steps as the reader counts them: by their number in the run,
// or, when steps of another phase came between (evaluation passes), by their
// number among the steps of their phase ("training step 60").
type namer struct {
	word string
	num  func(i int) int64
}

func (n namer) one(i int) string { return fmt.Sprintf("%s %d", n.word, n.num(i)) }

func (n namer) span(idx []int) string {
	return fmt.Sprintf("%ss %d–%d", n.word, n.num(idx[0]), n.num(idx[len(idx)-1]))
}

func stepNamer(steps []RoadStep, phase string) namer {
	mixed := false
	for _, s := range steps {
		mixed = mixed || s.Phase != phase
	}
	word := map[string]string{"train": "training step", "eval": "evaluation step", "forward": "forward step"}[phase]
	if !mixed || word == "" || steps[0].Step != 0 {
		return namer{"step", func(i int) int64 { return steps[i].Step }}
	}
	nth := make([]int64, len(steps))
	var k int64
	for i, s := range steps {
		nth[i] = k
		if s.Phase == phase {
			k++
		}
	}
	return namer{word, func(i int) int64 { return nth[i] }}
}

// inputText: "training step 60: inputs 16 × 1024 (16,384 tokens), 8.0× the
// tokens of training steps 0–59 (8 × 256); at their 906.69 KiB per token
// above what is held between steps, its tokens need 14.17 GiB: 15.69 GiB with
// the 1.52 GiB held at its start, against the 8.00 GiB the process could use".
// tin: the steps compared whose inputs were kept; when the agent kept only
// some steps' inputs, the text says how many of the span's.
func inputText(steps []RoadStep, tin []int, fi int, c RoadChange, cap int64, name namer) string {
	f := steps[fi]
	var b strings.Builder
	fmt.Fprintf(&b, "%s: inputs %s (%s tokens), %.1f× the tokens of %s (%s", name.one(fi), shapeText(f.Inputs),
		profiler.FormatCount(c.Tokens), float64(c.Tokens)/float64(c.BaseTokens), name.span(tin), shapeText(typical(steps, tin, c.BaseTokens)))
	if n := phaseSteps(steps, tin[0], tin[len(tin)-1], f.Phase); n > len(tin) {
		fmt.Fprintf(&b, "; inputs kept at %d of those %d steps", len(tin), n)
	}
	b.WriteString(")")
	if c.BasePerToken <= 0 {
		return b.String()
	}
	if !f.OOM {
		fmt.Fprintf(&b, "; it took %s per token above the %s held at its start, the steps before %s", fb(c.PerToken),
			fb(c.StartAllocated), fb(c.BasePerToken))
		return b.String()
	}
	fmt.Fprintf(&b, "; at their %s per token above what was held between steps, its tokens need %s: %s with the %s held at its start",
		fb(c.BasePerToken), fb(c.Needed), fb(c.Needed+c.StartAllocated), fb(c.StartAllocated))
	if cap > 0 {
		fmt.Fprintf(&b, ", against the %s the process could use", fb(cap))
	}
	return b.String()
}

// phaseSteps counts the steps of phase from index lo to hi, the OOM step aside.
func phaseSteps(steps []RoadStep, lo, hi int, phase string) int {
	n := 0
	for _, s := range steps[lo : hi+1] {
		if s.Phase == phase && !s.OOM {
			n++
		}
	}
	return n
}

// typical is the inputs of the last step of idx with the given tokens.
func typical(steps []RoadStep, idx []int, toks int64) [][]int64 {
	for k := len(idx) - 1; k >= 0; k-- {
		if in := steps[idx[k]].Inputs; tokens(in) == toks {
			return in
		}
	}
	return nil
}

type growthRun struct {
	steps          int
	rate, from, to int64
}

// growth finds memory rising step after step at the end of base: the
// Theil-Sen slope of allocated-at-step-end over the steps since the lowest
// level (robust to saw-tooth and to a few odd steps), when the rise is large
// (growthMin and growthShare of cap) and most steps of the run end higher
// than the one before them a few steps earlier.
func growth(steps []RoadStep, base []int, cap int64) (growthRun, bool) {
	lo := 0
	for k, i := range base {
		if steps[i].Allocated <= steps[base[lo]].Allocated {
			lo = k
		}
	}
	run := base[lo:]
	if len(run) < 4 {
		return growthRun{}, false
	}
	from, to := steps[run[0]].Allocated, steps[run[len(run)-1]].Allocated
	rise := to - from
	if rise < growthMin || (cap > 0 && float64(rise) < growthShare*float64(cap)) {
		return growthRun{}, false
	}
	lag := max(1, len(run)/10)
	up := 0
	for k := lag; k < len(run); k++ {
		if steps[run[k]].Allocated > steps[run[k-lag]].Allocated {
			up++
		}
	}
	if 4*up < 3*(len(run)-lag) {
		return growthRun{}, false
	}
	var slopes []float64
	stride := max(1, len(run)/60) // at most ~1,800 pairs
	for a := 0; a < len(run); a += stride {
		for b := a + stride; b < len(run); b += stride {
			ds := steps[run[b]].Step - steps[run[a]].Step
			if ds > 0 {
				slopes = append(slopes, float64(steps[run[b]].Allocated-steps[run[a]].Allocated)/float64(ds))
			}
		}
	}
	sort.Float64s(slopes)
	rate := int64(slopes[len(slopes)/2])
	if rate <= 0 {
		return growthRun{}, false
	}
	return growthRun{steps: int(steps[run[len(run)-1]].Step-steps[run[0]].Step) + 1, rate: rate, from: from, to: to}, true
}

// ForecastLevels are the steps as profiler/forecast reads them, leaving out
// those whose allocator the agent did not read (-1) and the step that ran out
// of memory (measured at the error, not at its end): the daemon's warner and
// a snapshot's road project from the same levels.
func ForecastLevels(steps []RoadStep) []forecast.Level {
	out := make([]forecast.Level, 0, len(steps))
	for _, s := range steps {
		if s.Allocated < 0 || s.Reserved < 0 || s.Peak < 0 || s.OOM {
			continue
		}
		out = append(out, forecast.Level{Step: int(s.Step), TimeS: float64(s.UnixMS) / 1000, Allocated: s.Allocated,
			Reserved: s.Reserved, Peak: s.Peak})
	}
	return out
}

// heldBefore is the memory allocated at the end of the last measured step
// before step i (the agent may not read every step), or -1.
func heldBefore(steps []RoadStep, i int) int64 {
	for j := i - 1; j >= 0; j-- {
		if steps[j].Allocated >= 0 {
			return steps[j].Allocated
		}
	}
	return -1
}

// tokens is the product of the first input's dimensions but the last of a
// 3-d or larger one (batch × sequence of a [batch, seq, hidden] input); 0 none.
func tokens(inputs [][]int64) int64 {
	if len(inputs) == 0 || len(inputs[0]) == 0 {
		return 0
	}
	s := inputs[0]
	if len(s) > 2 {
		s = s[:len(s)-1]
	}
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func shapeText(inputs [][]int64) string {
	if len(inputs) == 0 {
		return "unknown"
	}
	parts := make([]string, len(inputs[0]))
	for i, d := range inputs[0] {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, " × ")
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// downsampleRoad keeps every step of a short run; of a long one, the last
// RoadTail whole and, before them, one step per bucket: the one with the
// highest peak, marked recorded when any step of it was (an OOM step is kept
// whatever its peak).
func downsampleRoad(steps []RoadStep) []RoadStep {
	if len(steps) <= RoadPoints {
		return steps
	}
	head, tail := steps[:len(steps)-RoadTail], steps[len(steps)-RoadTail:]
	n := RoadPoints - RoadTail
	out := make([]RoadStep, 0, RoadPoints+16)
	for b := range n {
		lo, hi := b*len(head)/n, (b+1)*len(head)/n
		best, rec := lo, false
		for i := lo; i < hi; i++ {
			if head[i].OOM {
				out = append(out, head[i])
			}
			if head[i].Peak > head[best].Peak {
				best = i
			}
			rec = rec || head[i].Recorded
		}
		if hi > lo && !head[best].OOM {
			s := head[best]
			s.Recorded = rec
			out = append(out, s)
		}
	}
	return append(out, tail...)
}
