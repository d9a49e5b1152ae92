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

// shareCasts marks the fitTokens allocations of a weight's half size
// that are weights' casts: in forward, one followed by an allocation of
// the same line but of another size (the cast, then the product it feeds:
// activations of one line keep their size, as in GELU's chain of
// elementwise ops); in backward, one followed by a gradient of twice its
// size (a bf16 weight gradient, then its fp32 copy for .grad). Where fewer
// are found than a step makes (once a weight, a phase and a step), the rest
// is shared over the others of that size and phase.
func (ft *fitTrace) shareCasts(halves map[int64]int) {
	type key struct {
		size int64
		bwd  bool
	}
	found, others := map[key]int{}, map[key]int{}
	for i := range ft.allocs {
		a := &ft.allocs[i]
		if a.cls != fitTokens || halves[a.size] == 0 {
			continue
		}
		k := key{a.size, a.bwd}
		if ft.isCast(i) && found[k] < halves[a.size]*ft.steps() {
			a.fixedShare = 1
			found[k]++
		} else {
			others[k]++
		}
	}
	for i := range ft.allocs {
		a := &ft.allocs[i]
		k := key{a.size, a.bwd}
		if a.cls != fitTokens || halves[a.size] == 0 || a.fixedShare == 1 || others[k] == 0 {
			continue
		}
		if left := halves[a.size]*ft.steps() - found[k]; left > 0 {
			a.fixedShare = min(1, float32(left)/float32(others[k]))
		}
	}
}

// isCast says whether allocation i looks like a weight's cast by what follows it.
func (ft *fitTrace) isCast(i int) bool {
	if i+1 >= len(ft.allocs) {
		return false
	}
	a, next := ft.allocs[i], ft.allocs[i+1]
	if a.bwd {
		return next.cls == fitGrad && next.size >= 2*a.size-1024 && next.size <= 2*a.size+1024
	}
	return next.stack == a.stack && next.size != a.size
}

// survivors: an allocation that grows with the batch but outlived its step
// (a library's workspace made at the first matrix product, 32 MiB for
// cuBLAS) is fixed: activations never survive the optimizer step.
func (ft *fitTrace) survivors() {
	if len(ft.opt) == 0 {
		return
	}
	end := ft.opt[len(ft.opt)-1].start
	freed := make([]bool, len(ft.allocs))
	for _, e := range ft.ev {
		if e < 0 {
			freed[-e-1] = true
		}
	}
	for i := range ft.allocs {
		if a := &ft.allocs[i]; !freed[i] && a.cls == fitTokens && a.t < end {
			a.cls = fitFixed
		}
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
