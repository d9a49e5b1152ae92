package analyze

import (
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// Memory in flight in backward. When a snapshot the agent named was taken at
// an OOM inside backward(), the walk has named what Python can reach: the
// parameters, their gradients, the optimizer's state, the tensors the graph
// saved, the locals. What no Python object holds then is the autograd
// engine's own: the gradients it has computed and not yet handed on (the
// logits' gradient, as large as the logits, in a language model's backward)
// and the cuBLAS workspace of its device thread. On a GPT-2 LoRA run that ran
// out of memory in backward on the H200 that was 818 MiB of 5.50 GiB, 14.5%
// (examples/snapshots/oom/lora_gpt2.pickle: 786 MiB, the size of lm_head's
// log-softmax output, and 32 MiB). Such blocks are named by that phase and
// counted as gradients.

// inFlightLabel names them; the line is backward()'s caller.
const inFlightLabel = "[in flight in backward()] held by no Python object: the autograd engine's gradients " +
	"not yet passed on and its thread's cuBLAS workspace"

// backwardInFlight returns the origin for unnamed blocks alive at the
// snapshot when it was taken at an OOM inside backward(), and whether there is
// one: the agent named tensors, and the last OOM is the trace's last event
// with a backward() on its stack.
func (a *analysis) backwardInFlight(t *tracker) (int32, bool) {
	if a.names == nil || t == nil || len(t.ooms) == 0 {
		return 0, false
	}
	last := t.ooms[len(t.ooms)-1]
	if last.cur != t.cur || !a.inBackward(last.stack) {
		return 0, false
	}
	label := inFlightLabel
	if f, ok := a.origins.userFrame(last.stack); ok {
		label = strings.Replace(label, "backward()]", "backward() at "+a.origins.placeOf(f)+"]", 1)
	}
	if a.origins.inFlight == 0 {
		a.origins.inFlight = a.origins.add(synthetic{kind: "inflight", label: label})
	}
	return a.origins.inFlight, true
}

// inBackward: a frame of the stack is a backward() call (the agent records
// the user's line with the function it called) or autograd's own code.
func (a *analysis) inBackward(s profiler.StackID) bool {
	for _, f := range a.origins.stackPath(s) {
		if f.Func == "backward" || strings.Contains(f.File, "torch/autograd/") {
			return true
		}
	}
	return false
}
