package analyze_test

import (
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/profiler/analyze"
)

func peakCategory(cats []analyze.Category, name string) analyze.Category {
	for _, c := range cats {
		if c.Name == name {
			return c
		}
	}
	return analyze.Category{Name: name}
}

// Every category at the peak that holds bytes counts the blocks that hold
// them, pre-trace blocks included (the snapshot's segments list them).
func TestCategoriesCountBlocks(t *testing.T) {
	all := inputs(t)
	for _, n := range []string{"rank0", "rank1", "rank0_oom", "rank1_oom"} { // a real two-rank job, named by the agent
		all = append(all, input{n, filepath.Join(exampleDir, "..", "ranks", "out", "snapshots", n+".pickle")})
	}
	for _, in := range all {
		t.Run(in.name, func(t *testing.T) {
			need(t, in.path)
			r, err := analyze.Run(in.path, analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range r.Devices {
				for _, c := range d.Categories {
					if (c.Bytes > 0) != (c.Blocks > 0) {
						t.Errorf("device %d: %s holds %d bytes in %d blocks", d.Device, c.Name, c.Bytes, c.Blocks)
					}
				}
			}
		})
	}
}

// The state opt.step() made is optimizer state, whether the trace saw it made
// (gpt2_train's first step) or it predates the trace but not recording
// (gpt2_long_1000k: the frames of the blocks at the snapshot say
// train_gpt2.py:24 through torch/optim); when it predates recording, blocks
// without frames are not claimed as parameters (gpt2_12l_python_stacks).
func TestOptimizerStateFromFrames(t *testing.T) {
	line24 := func(r *analyze.Result) (int64, analyze.CategoryBytes) {
		for _, s := range r.Sites {
			if filepath.Base(s.File) == "train_gpt2.py" && s.Line == 24 {
				return s.PeakBytes, s.Categories
			}
		}
		return 0, analyze.CategoryBytes{}
	}
	r := result(t, "gpt2_train")
	if held, cats := line24(r); held == 0 || cats.OptimizerState != held {
		t.Errorf("gpt2_train: opt.step() holds %d at the peak, categories %v", held, cats)
	}
	var big expectation
	for _, e := range expectations(t) {
		if e.Name == "gpt2_long_1000k" {
			big = e
		}
	}
	if long, why := analyseLabelled(t, big); long == nil {
		reftool.Missing(t, "gpt2_long_1000k: %s", why)
	} else {
		held, cats := line24(long)
		st := peakCategory(long.Categories, analyze.CatOptimizerState)
		if held == 0 || cats.OptimizerState != held || st.Bytes < held || st.Blocks == 0 {
			t.Errorf("gpt2_long_1000k: opt.step() holds %d at the peak (%v); optimizer_state %+v", held, cats, st)
		}
	}
	r = result(t, "gpt2_12l_python_stacks")
	d := r.Devices[0]
	if p := peakCategory(r.Categories, analyze.CatParameter); p.Bytes != 0 {
		t.Errorf("gpt2_12l_python_stacks: frameless pre-trace blocks claimed as parameters: %+v", p)
	}
	if u := peakCategory(r.Categories, analyze.CatUnknown); u.Bytes != d.PreTraceBytes || u.Blocks == 0 {
		t.Errorf("gpt2_12l_python_stacks: unknown %+v, pre-trace bytes %d", u, d.PreTraceBytes)
	}
}
