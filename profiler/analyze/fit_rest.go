package analyze

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// fit_rest.go: a trace that ends in an out-of-memory error before its step
// finished never shows the rest of that step. What it would have needed is
// estimated, so that a plan is not called fitting on the part that ran:
//
//   - the rest of the forward: the repeated blocks the agent named weights
//     for but that saved no activations yet, each saving what the others did;
//   - the start of the backward: the largest activation's gradient (the
//     logits') beside everything saved;
//   - the optimizer step, when none was recorded: gradients the size of the
//     weights, AdamW's two fp32 states for each, and a list of temporaries the
//     size of the gradients (foreach kernels), every weight taken as trained.

// FitRest is what the unrecorded rest of a failed step is estimated to add
// (bytes at the recorded size).
type FitRest struct {
	Forward int64 `json:"forward_bytes"` // saved activations of the blocks not reached (at the recorded size)
	// Loss is what the loss over the logits adds after the failed request
	// made them, when the request (the largest allocation the step had
	// asked for) failed in forward: their fp32 copy and its log-softmax, 4x
	// the request, then 1x more as backward starts (6x the logits above the
	// level before them, measured on GPT-2 on the H200: docs/fit.md).
	Loss     int64 `json:"loss_bytes"`
	Gradient int64 `json:"gradient_bytes"` // the gradients, when no backward was recorded
	State    int64 `json:"state_bytes"`    // optimizer state, when no optimizer step was recorded
}

// oomInBackward: the failing request's stack is autograd's (no Python
// frames) or goes through torch's backward().
func oomInBackward(frames *profiler.Frames, stack profiler.StackID) bool {
	ids := frames.StackAt(stack)
	if len(ids) == 0 {
		return true
	}
	for _, id := range ids {
		f := frames.FrameAt(id)
		if f.Func == "backward" && (strings.HasSuffix(f.File, "torch/autograd/__init__.py") || strings.HasSuffix(f.File, "torch/_tensor.py")) {
			return true
		}
	}
	return false
}

// rest estimates the unrecorded rest of the failed step (zero when the trace
// does not end in a failure).
func (m *FitModel) rest() FitRest {
	ft := m.trace
	var r FitRest
	if ft.oomAt < 0 {
		return r
	}
	if !ft.oomInBwd && ft.blocksTotal > len(ft.modules) && len(ft.modules) > 0 {
		var saved int64
		for _, b := range ft.modules {
			saved += b.Saved
		}
		r.Forward = saved / int64(len(ft.modules)) * int64(ft.blocksTotal-len(ft.modules))
	}
	if !ft.oomInBwd && ft.oomCls == fitTokens && ft.oomSize >= 2*m.LargestTransient {
		r.Loss = 4 * ft.oomSize
	}
	if m.State == 0 && len(ft.opt) == 0 {
		r.State = 2 * ft.weights
		if m.Gradients == 0 {
			r.Gradient = ft.weights
		}
	}
	return r
}

func (r FitRest) String() string {
	var parts []string
	if r.Forward > 0 {
		parts = append(parts, "the forward's blocks not reached save "+fb(r.Forward))
	}
	if r.Loss > 0 {
		parts = append(parts, "the failed request is taken for the logits: the loss over them adds "+fb(r.Loss))
	}
	parts = append(parts, "the backward starts with the largest activation's gradient")
	if r.State > 0 {
		parts = append(parts, fmt.Sprintf("no optimizer step was recorded: every weight taken as trained by AdamW "+
			"(gradients %s, state %s)", fb(r.Gradient), fb(r.State)))
	}
	return strings.Join(parts, "; ")
}
