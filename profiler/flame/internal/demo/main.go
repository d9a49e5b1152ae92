// Command demo writes a flame-graph page for a synthetic tree of about 100k
// frames, shaped like a training loop's allocation stacks. The browser test
// renders it to check the page works and stays fast at that size; the output
// is deterministic.
//
//	go run ./profiler/flame/internal/demo [-nodes 100000] out.html
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

func main() {
	nodes := flag.Int("nodes", 100_000, "approximate number of frames in the tree")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: demo [-nodes N] out.html")
		os.Exit(2)
	}
	t := Build(*nodes)
	if err := write(flag.Arg(0), t); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "demo: %d frames, %d bytes at the root\n", t.NumNodes(), t.Root.Value)
}

func write(path string, t *flame.Tree) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := flame.WriteHTML(w, t); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// gen grows the tree breadth first from a fixed training-loop prefix. Each
// generated frame is remembered only by its parent, so paths are rebuilt at
// the leaves instead of copied for every frame.
type gen struct {
	rng    *rand.Rand
	frames []profiler.Frame
	parent []int
	depth  []int
}

func (g *gen) add(parent int, f profiler.Frame) int {
	g.frames = append(g.frames, f)
	g.parent = append(g.parent, parent)
	d := 0
	if parent >= 0 {
		d = g.depth[parent] + 1
	}
	g.depth = append(g.depth, d)
	return len(g.frames) - 1
}

func (g *gen) path(i int) []profiler.Frame {
	var p []profiler.Frame
	for ; i >= 0; i = g.parent[i] {
		p = append(p, g.frames[i])
	}
	for a, b := 0, len(p)-1; a < b; a, b = a+1, b-1 {
		p[a], p[b] = p[b], p[a]
	}
	return p
}

var (
	userFiles = []string{"train.py", "model.py", "layers/attention.py", "layers/mlp.py", "data.py", "utils/checkpoint.py"}
	userFuncs = []string{"forward", "train_step", "compute_loss", "attention", "feed_forward", "rotary_embed",
		"apply_mask", "collate", "shard_batch", "evaluate", "clip_grads", "project_qkv", "merge_heads"}
	libFiles = []string{
		"/usr/lib/python3/site-packages/torch/nn/modules/module.py",
		"/usr/lib/python3/site-packages/torch/nn/modules/linear.py",
		"/usr/lib/python3/site-packages/torch/nn/functional.py",
		"/usr/lib/python3/site-packages/torch/autograd/graph.py",
		"/usr/lib/python3/site-packages/torch/optim/adamw.py",
		"/usr/lib/python3/site-packages/torch/utils/data/dataloader.py",
		"/usr/lib/python3/site-packages/transformers/models/llama/modeling_llama.py",
	}
	libFuncs = []string{"_call_impl", "_wrapped_call_impl", "linear", "scaled_dot_product_attention", "layer_norm",
		"softmax", "dropout", "_engine_run_backward", "step", "_multi_tensor_adamw", "__next__", "pin_memory",
		"LlamaDecoderLayer.forward", "LlamaAttention.forward", "LlamaMLP.forward", "silu", "matmul", "embedding"}
	cppFuncs = []string{"at::native::empty_cuda", "c10::cuda::CUDACachingAllocator::malloc", "at::mm", "at::addmm",
		"at::native::cat", "torch::autograd::Engine::evaluate_function", "at::_softmax", "at::native::layer_norm_cuda"}
)

// frame invents a plausible frame; line numbers make siblings distinct.
func (g *gen) frame(depth, sibling int) profiler.Frame {
	r := g.rng.IntN(10)
	line := 10 + sibling*7 + g.rng.IntN(5)
	switch {
	case depth > 14 && r < 3:
		return profiler.Frame{Func: cppFuncs[g.rng.IntN(len(cppFuncs))]} // C++ frames have no Python file
	case r < 4:
		return profiler.Frame{File: userFiles[g.rng.IntN(len(userFiles))], Line: line, Func: userFuncs[g.rng.IntN(len(userFuncs))]}
	default:
		return profiler.Frame{File: libFiles[g.rng.IntN(len(libFiles))], Line: line, Func: libFuncs[g.rng.IntN(len(libFuncs))]}
	}
}

// Build makes a deterministic tree of about n frames.
func Build(n int) *flame.Tree {
	g := &gen{rng: rand.New(rand.NewPCG(2024, 7))}
	prefix := []profiler.Frame{
		{File: "train.py", Line: 212, Func: "<module>"},
		{File: "train.py", Line: 198, Func: "main"},
		{File: "train.py", Line: 151, Func: "train"},
	}
	top := -1
	for _, f := range prefix {
		top = g.add(top, f)
	}
	phases := []profiler.Frame{
		{File: "train.py", Line: 120, Func: "train_step"},
		{File: "train.py", Line: 131, Func: "backward"},
		{File: "train.py", Line: 140, Func: "optimizer_step"},
		{File: "data.py", Line: 64, Func: "next_batch"},
		{File: "train.py", Line: 175, Func: "evaluate"},
	}
	queue := []int{}
	for _, f := range phases {
		queue = append(queue, g.add(top, f))
	}
	var leaves []int
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		fan := g.fanout(g.depth[i])
		if len(g.frames)+fan > n {
			fan = 0
		}
		if fan == 0 {
			leaves = append(leaves, i)
			continue
		}
		for s := range fan {
			queue = append(queue, g.chain(i, s))
		}
	}
	t := flame.NewTree("synthetic training step", flame.WeightPeak)
	for _, leaf := range leaves {
		// Heavy-tailed sizes, like real activations next to small buffers.
		size := int64(512) << g.rng.IntN(15)
		size += g.rng.Int64N(size)
		t.Add(g.path(leaf), size, 1+g.rng.Int64N(40))
	}
	t.Finish()
	return t
}

// fanout is wide near the top and narrows with depth, so the tree is both
// deep (like real stacks) and wide enough to reach its size.
func (g *gen) fanout(depth int) int {
	switch {
	case depth < 6:
		return 3 + g.rng.IntN(4)
	case depth < 30:
		if g.rng.IntN(10) < 2 {
			return 0
		}
		return 1 + g.rng.IntN(3)
	default:
		return 0
	}
}

// chain adds a child plus a few wrapper frames under it (module __call__
// layers, autograd hooks), the way real Python stacks nest; it returns the
// deepest frame added.
func (g *gen) chain(parent, sibling int) int {
	i := g.add(parent, g.frame(g.depth[parent]+1, sibling))
	for range g.rng.IntN(3) {
		i = g.add(i, g.frame(g.depth[i]+1, 0))
	}
	return i
}
