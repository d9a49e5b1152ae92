package analyze

import (
	"fmt"
	"regexp"
	"strconv"
)

// fit.go: the peak of a training step at other batch sizes and sequence
// lengths, from one recorded step. Every allocation of the trace is
// classified (fit_trace.go) as growing with batch × tokens (activations,
// logits, the backward's activation gradients and their temporaries) or
// not (weights, their autocast copies, gradients, optimizer state, the
// optimizer step's temporaries); the trace is replayed with the growing
// ones scaled, through a model of the caching allocator
// (fit_allocator.go), which gives the allocated and the reserved peak. The
// replay is of the steady state: optimizer state that the first step
// creates is there from the start, as in every later step.

// FitSize is the size of a step: batch × sequence length.
type FitSize struct {
	Batch int64 `json:"batch"`
	Seq   int64 `json:"seq"`
}

func (s FitSize) String() string { return fmt.Sprintf("%dx%d", s.Batch, s.Seq) }

func (s FitSize) tokens() float64 { return float64(s.Batch) * float64(s.Seq) }

var fitSizeRE = regexp.MustCompile(`^(\d+)x(\d+)$`)

// ParseFitSize reads "BATCHxSEQ" (e.g. 8x512).
func ParseFitSize(s string) (FitSize, error) {
	m := fitSizeRE.FindStringSubmatch(s)
	if m == nil {
		return FitSize{}, fmt.Errorf("%q is not BATCHxSEQ (e.g. 8x512)", s)
	}
	b, _ := strconv.ParseInt(m[1], 10, 64)
	l, _ := strconv.ParseInt(m[2], 10, 64)
	if b <= 0 || l <= 0 || b > 1<<30 || l > 1<<30 {
		return FitSize{}, fmt.Errorf("%q: batch and sequence length must be positive", s)
	}
	return FitSize{Batch: b, Seq: l}, nil
}

// FitModule is one repeated block (a transformer layer) and what
// checkpointing it gives back at the recorded size.
type FitModule struct {
	Name  string `json:"name"`  // "model.transformer.h.3"
	Short string `json:"short"` // "h.3"
	Saved int64  `json:"saved_bytes"`
	// Kept is what checkpointing keeps of it (its input), Saved - Kept what it gives back.
	Kept int64 `json:"kept_bytes"`
}

// FitModel is what one recorded step says about memory against size.
type FitModel struct {
	File     string  `json:"file"`
	Recorded FitSize `json:"recorded"`
	// RecordedSource says where Recorded came from: "given" or "shapes" (the agent's).
	RecordedSource string `json:"recorded_source"`
	// Bytes at the recorded peak by how they change with size.
	Fixed     int64 `json:"fixed_bytes"`     // weights and their copies, the optimizer step's temporaries
	Gradients int64 `json:"gradient_bytes"`  // the most gradients alive at once
	State     int64 `json:"optimizer_state"` // optimizer state
	// PerToken is what one more token (of one sequence) adds where the most
	// memory that grows with size is alive.
	PerToken int64 `json:"per_token_bytes"`
	// LargestTransient is the largest allocation that grows with size, at the recorded size.
	LargestTransient int64 `json:"largest_transient"`
	// ForwardShare is the forward pass's share of a step's time (trace times, Python stacks included).
	ForwardShare float64     `json:"forward_share"`
	Modules      []FitModule `json:"modules,omitempty"`
	// AtRecorded is the replay at the recorded size; RecordedPeak what the trace measured.
	AtRecorded   FitPrediction `json:"at_recorded"`
	RecordedPeak int64         `json:"recorded_peak"`
	EndsInOOM    bool          `json:"ends_in_oom"`
	// Unrecorded is what the rest of a step that failed is estimated to add (fit_rest.go).
	Unrecorded FitRest  `json:"unrecorded"`
	Notes      []string `json:"notes,omitempty"`

	trace *fitTrace
}

// FitModel builds the model of the peak device's trace. recorded is the
// batch and sequence length the trace ran at; zero: read from the agent's
// shapes. The analysis must have kept its trace (Options.KeepTrace).
func (r *Result) FitModel(recorded FitSize) (*FitModel, error) {
	d := r.peakDevice()
	if d == nil || d.fit == nil || len(d.fit.allocs) == 0 {
		return nil, fmt.Errorf("%s: no allocation trace to fit (record with torch.cuda.memory._record_memory_history)", r.File)
	}
	m := &FitModel{File: r.File, Recorded: recorded, RecordedSource: "given", trace: d.fit,
		RecordedPeak: d.Peak.Bytes, EndsInOOM: d.fit.oomAt >= 0}
	if recorded.Batch <= 0 || recorded.Seq <= 0 {
		if d.fit.recorded.Batch <= 0 {
			return nil, fmt.Errorf("%s: the batch and sequence length it ran at are unknown: give them (e.g. --recorded 4x512)", r.File)
		}
		m.Recorded, m.RecordedSource = d.fit.recorded, "shapes"
	}
	m.describe()
	m.AtRecorded = m.Predict(m.Recorded, FitVariant{}, 0)
	m.modules()
	return m, nil
}

// describe sums the recorded peak by class and reads the forward's share.
func (m *FitModel) describe() {
	ft := m.trace
	live := map[fitClass]int64{}
	var best map[fitClass]int64
	var level, top, tokens int64
	for _, e := range ft.ev {
		_, a := fitEvent(e, ft)
		if e > 0 {
			live[a.cls] += a.size
			level += a.size
			if a.cls == fitTokens {
				m.LargestTransient = max(m.LargestTransient, a.size)
			}
		} else {
			live[a.cls] -= a.size
			level -= a.size
		}
		tokens = max(tokens, live[fitTokens])
		m.Gradients = max(m.Gradients, live[fitGrad])
		m.State = max(m.State, live[fitState])
		if level > top || best == nil {
			top, best = level, map[fitClass]int64{fitFixed: live[fitFixed], fitTokens: live[fitTokens]}
		}
	}
	m.Fixed = ft.base + best[fitFixed]
	m.PerToken = int64(float64(tokens) / float64(m.Recorded.Seq) / float64(m.Recorded.Batch))
	m.ForwardShare = ft.forwardShare()
	m.Unrecorded = m.rest()
	if ft.oomAt >= 0 {
		m.Notes = append(m.Notes, "the trace ends in an out-of-memory error: what the rest of that step needs is "+
			"estimated ("+m.Unrecorded.String()+"); a snapshot of one whole step at a smaller batch is exact")
	}
}

// fitEvent is the allocation an event names.
func fitEvent(e int32, ft *fitTrace) (int, *fitAlloc) {
	i := int(e) - 1
	if e < 0 {
		i = int(-e) - 1
	}
	return i, &ft.allocs[i]
}

// forwardShare is the forward pass's share of the last whole step: from
// the step's start to its first allocation on autograd's thread, over the
// step's length (to its optimizer step's end). 1/3 when the trace cannot say.
func (ft *fitTrace) forwardShare() float64 {
	const guess = 1.0 / 3
	if len(ft.allocs) == 0 {
		return guess
	}
	start, end := ft.allocs[0].t, ft.allocs[len(ft.allocs)-1].t
	if n := len(ft.opt); n > 0 {
		end = ft.opt[n-1].end
		if n > 1 {
			start = ft.opt[n-2].end
		}
	}
	for _, a := range ft.allocs {
		if a.t >= start && a.bwd && end > start {
			return min(1, max(0.05, float64(a.t-start)/float64(end-start)))
		}
	}
	return guess
}

// modules turns the agent's blocks into FitModules at the recorded size.
func (m *FitModel) modules() {
	for _, b := range m.trace.modules {
		kept := int64(m.Recorded.tokens()) * b.InputPerToken
		m.Modules = append(m.Modules, FitModule{Name: b.Name, Short: shortModule(b.Name), Saved: b.Saved,
			Kept: min(kept, b.Saved)})
	}
	if len(m.Modules) == 0 {
		m.Notes = append(m.Notes, "no tensor names: which blocks to checkpoint is unknown (take the snapshot with "+
			"the vramscope agent, which names what each module saved for backward)")
	}
}

// gradBytes and stateBytes are the gradients and optimizer state of a step,
// recorded or estimated.
func (m *FitModel) gradBytes() int64  { return max(m.Gradients, m.Unrecorded.Gradient) }
func (m *FitModel) stateBytes() int64 { return max(m.State, m.Unrecorded.State) }
