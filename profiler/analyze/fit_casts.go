package analyze

// fit_casts.go tells weights' casts from activations of the same size.
// Under autocast every step casts each fp32 weight to bf16 in forward (a
// block of half the weight's size, saved for backward) and makes its bf16
// gradient in backward: blocks made in forward and backward that do not
// grow with the batch. An activation can have exactly that size (GPT-2's
// [tokens, 3·768] bf16 output of c_attn at 1,024 tokens is the size of a
// bf16 c_fc weight, 768·3072), and blocks do not say which is which. So of
// the blocks of a weight's half size made in a phase, as many as the weights
// of that size (once a step) count as fixed and the rest as growing with
// the batch: each such block keeps that share of its bytes fixed.

// shareCasts sets fixedShare for the fitTokens allocations of a weight's
// half size, by phase (forward or backward).
func (ft *fitTrace) shareCasts(halves map[int64]int) {
	type key struct {
		size int64
		bwd  bool
	}
	count := map[key]int{}
	for _, a := range ft.allocs {
		if a.cls == fitTokens && halves[a.size] > 0 {
			count[key{a.size, a.bwd}]++
		}
	}
	steps := ft.steps()
	for i := range ft.allocs {
		a := &ft.allocs[i]
		if a.cls != fitTokens || halves[a.size] == 0 {
			continue
		}
		want := float32(halves[a.size] * steps)
		a.fixedShare = min(1, want/float32(count[key{a.size, a.bwd}]))
	}
}

// steps counts the forward passes of the trace: its optimizer steps, and
// one more when allocations follow the last of them.
func (ft *fitTrace) steps() int {
	n := len(ft.opt)
	if n == 0 {
		return 1
	}
	if last := ft.allocs[len(ft.allocs)-1]; last.t > ft.opt[n-1].end {
		n++
	}
	return n
}
