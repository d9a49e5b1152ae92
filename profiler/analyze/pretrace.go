package analyze

import (
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// Memory allocated before the trace began and alive at the snapshot is known
// block by block from the snapshot's segments, each with the stack that
// allocated it: optimizer state made at the first opt.step() before
// recording started (AdamW's exp_avg and exp_avg_sq, twice the parameters)
// is told from the parameters by its frames in torch/optim, and every such
// block is counted in its category.

// preCategory is the category of a block alive at the snapshot that the
// trace never allocated: graph_pool in a private pool's segment (CUDA
// graphs), else what the agent named it, else (with names) unknown,
// else optimizer state when optimizer code allocated it. A block with no
// frames at all (made before recording began) in a run that steps an
// optimizer whose state no live block's frames show may be a parameter or
// that state (recording began after the first opt.step()): unknown.
// Otherwise it is taken for a parameter (the model is built first).
func (a *analysis) preCategory(stack profiler.StackID, name *profiler.NamedTensor, stateUnseen, pool bool) string {
	switch {
	case pool: // a private pool's segment: CUDA graphs' memory (categories_infer.go)
		return CatGraphPool
	case name != nil:
		return tensorCategory(name.Kind)
	case a.names != nil:
		return CatUnknown
	case a.optimizerStack(stack):
		return CatOptimizerState
	case stack == 0 && stateUnseen:
		return CatUnknown
	}
	return CatParameter
}

// optimizerStateUnseen says whether a device steps an optimizer (its
// Optimizer.step annotations) while none of the blocks alive at the snapshot
// was allocated by optimizer code: its state then predates recording.
func (a *analysis) optimizerStateUnseen(segs []profiler.Segment, t *tracker, stepping bool) bool {
	if !stepping {
		return false
	}
	seen := map[profiler.StackID]bool{}
	for _, s := range segs {
		for _, b := range s.Blocks {
			stack := b.Stack
			if lb, ok := t.live[b.Addr]; ok {
				stack = lb.stack
				if lb.gap == nil {
					stack = profiler.StackID(lb.origin)
				}
			}
			if b.State == profiler.BlockInactive || stack == 0 || seen[stack] {
				continue
			}
			if seen[stack] = true; a.optimizerStack(stack) {
				return false
			}
		}
	}
	return true
}

// optimizerStack says whether a stack runs through torch.optim.
func (a *analysis) optimizerStack(s profiler.StackID) bool {
	for _, id := range a.frames.StackAt(s) {
		if strings.Contains(a.frames.FrameAt(id).File, "torch/optim/") {
			return true
		}
	}
	return false
}

// preTraceSplit is the pre-trace memory alive at the snapshot by category:
// bytes and blocks.
type preTraceSplit struct {
	bytes, blocks map[string]int64
}

func (p *preTraceSplit) add(cat string, size int64) {
	if p.bytes == nil {
		p.bytes, p.blocks = map[string]int64{}, map[string]int64{}
	}
	p.bytes[cat] += size
	p.blocks[cat]++
}

// blocksAt scales the blocks of each category to n of the bytes (fewer
// untracked bytes at an OOM than at the end): never more than there are.
func (p preTraceSplit) blocksAt(cat string, bytes int64) int64 {
	all, n := p.bytes[cat], p.blocks[cat]
	if all <= 0 || bytes >= all {
		return n
	}
	return int64(float64(n) * float64(bytes) / float64(all))
}
