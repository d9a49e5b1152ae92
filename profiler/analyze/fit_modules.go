package analyze

import (
	"sort"
	"strings"
)

// fit_modules.go reads, from the agent's tensor walk, what each repeated
// block of the model (a transformer layer: "transformer.h.3") saved for
// backward: what activation checkpointing of that block gives back.

// fitModule is one repeated block's saved activations at the recorded size.
type fitModule struct {
	Name  string // the module path, "model.transformer.h.3"
	Index int    // its number among the repeated blocks
	Saved int64  // bytes the autograd graph saved for backward in it
	// InputPerToken is what one token of the block's input takes (its
	// hidden size × the weights' element size): what checkpointing keeps.
	InputPerToken int64
}

// fitModules groups the walk's activations on dev by repeated block, reads
// the recorded batch and sequence length from their shapes, and counts the
// repeated blocks that have weights (blocks the forward may not have reached),
// and sums what modules outside them saved, but for embeddings: what the
// head and the loss save after the blocks.
func (ix *tensorIndex) fitModules(dev int) ([]fitModule, FitSize, int, int64) {
	if ix == nil {
		return nil, FitSize{}, 0, 0
	}
	var after int64
	byName := map[string]*fitModule{}
	hidden := map[string]map[int64]int{} // block -> bytes a token of a 1-D weight -> count
	sizes := map[FitSize]int64{}
	for _, e := range ix.walk.Entries {
		if e.Device != dev {
			continue
		}
		name, index, ok := repeatedBlock(e.Module)
		switch {
		case e.Kind == "activation":
			if len(e.Shape) >= 3 && e.Shape[1] > 1 {
				sizes[FitSize{Batch: e.Shape[0], Seq: e.Shape[1]}] += e.Bytes
			}
			if !ok {
				if !strings.Contains(e.Module, "emb") && !strings.HasSuffix(e.Module, ".wpe") && !strings.HasSuffix(e.Module, ".wte") {
					after += e.Bytes // the head and the loss, saved after the blocks
				}
				continue
			}
			m := byName[name]
			if m == nil {
				m = &fitModule{Name: name, Index: index}
				byName[name] = m
			}
			m.Saved += e.Bytes
		case e.Kind == "parameter" && ok && len(e.Shape) == 1 && e.Shape[0] > 0:
			if hidden[name] == nil {
				hidden[name] = map[int64]int{}
			}
			hidden[name][e.Bytes]++
		}
	}
	out := make([]fitModule, 0, len(byName))
	for name, m := range byName {
		m.InputPerToken = mostCommon(hidden[name])
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, heaviest(sizes), len(hidden), after
}

// repeatedBlock is the module path up to its first layer number
// ("model.transformer.h.3.mlp.c_fc" -> "model.transformer.h.3", 3).
func repeatedBlock(module string) (string, int, bool) {
	parts := strings.Split(module, ".")
	for i, p := range parts {
		if n, ok := layerNumber(p); ok && i > 0 {
			return strings.Join(parts[:i+1], "."), n, true
		}
	}
	return "", 0, false
}

func layerNumber(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = 10*n + int(c-'0')
	}
	return n, true
}

func mostCommon(m map[int64]int) int64 {
	var best int64
	for v, n := range m {
		if n > m[best] || (n == m[best] && v > best) {
			best = v
		}
	}
	return best
}

// heaviest is the (batch, sequence) pair leading the shapes that hold the
// most saved bytes: [batch, seq, hidden] activations outweigh the rest.
func heaviest(sizes map[FitSize]int64) FitSize {
	var best FitSize
	for s, b := range sizes {
		if b > sizes[best] || (b == sizes[best] && (s.Batch < best.Batch || best.Batch == 0)) {
			best = s
		}
	}
	return best
}

// shortModule is the last two parts of a module path ("h.3").
func shortModule(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, ".")
}
