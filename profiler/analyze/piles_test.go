package analyze_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// Memory that piles up (issue #16), on real recordings changed the way a
// program would have changed them: dumped earlier (snaptool cut: the trace
// and the blocks as they were then), or with a list cleared at the end
// (snaptool release). The recordings made for it are in
// expected_findings.json (record_piles.py; TestExpectedFindings).

// variant writes a changed copy of a real recording and analyses it.
func variant(t *testing.T, name string, opt analyze.Options, args ...string) *analyze.Result {
	t.Helper()
	src := pathOf(t, name)
	need(t, src)
	out := filepath.Join(t.TempDir(), name+"_"+args[0]+".pickle")
	snaptool(t, append(append([]string{args[0], src}, args[1:]...), out)...)
	r, err := analyze.Run(out, opt)
	if err != nil {
		t.Fatalf("analyze %s %s: %v", args[0], name, err)
	}
	return r
}

// cache_growth's table per length got its last new length in step 10 of 24
// and cache_infer's mask its last in iteration 7 of 18 (record_findings.py's
// schedule: new lengths at iterations 0, 1, 2, 3, 5, 7): dumped right then,
// each is a cache still growing (unbounded_cache, not cache_growth, and not
// a leak: it grew on 6 of steps 1..9, 4 of 1..6). The projection and the
// step at which a 2 GiB device fills follow from the bytes per step.
func TestUnboundedCacheDumpedWhileGrowing(t *testing.T) {
	for _, c := range []struct {
		name      string
		lastNew   int
		line      int
		entries   int64
		minShare  int64
		stepsKind string
	}{
		{"cache_growth", 10, 168, 8, 5, analyze.StepsFromAnnotations},
		{"cache_infer", 7, 282, 6, 5, analyze.StepsFromPeriodicity},
	} {
		full := result(t, c.name)
		cutAt := full.Steps[c.lastNew].EndUS
		r := variant(t, c.name, analyze.Options{DeviceMemory: 2 << 30}, "cut", strconv.FormatInt(cutAt, 10))
		if len(r.Steps) != c.lastNew+1 || r.StepSource != c.stepsKind {
			t.Fatalf("%s cut after step %d: %d steps from %s", c.name, c.lastNew, len(r.Steps), r.StepSource)
		}
		if got := strings.Join(kinds(r), " "); strings.Contains(got, "cache_growth") || strings.Contains(got, "leak") {
			t.Errorf("%s cut: %s", c.name, got)
		}
		f := one(t, r, analyze.KindUnboundedCache)
		n := f.Evidence.Numbers
		if filepath.Base(f.File) != "record_findings.py" || f.Line != c.line || n["blocks"] != c.entries || n["sizes"] != c.entries ||
			n["last_new_step"] != int64(c.lastNew) || n["peak_share_pct"] < c.minShare ||
			n["peak_share_pct"] != (100*n["bytes"]+r.Peak.Bytes/2)/r.Peak.Bytes {
			t.Errorf("%s cut: %s:%d %v", c.name, f.File, f.Line, n)
		}
		perStep := n["bytes"] / (int64(c.lastNew) + 1 - n["first_new_step"])
		if n["bytes_per_step"] != perStep || n["projected_bytes"] != n["bytes"]+1000*perStep {
			t.Errorf("%s cut: per step and projection %v", c.name, n)
		}
		lastPeak := r.Steps[len(r.Steps)-1].PeakBytes
		if fills := int64(c.lastNew) + (2<<30-lastPeak+perStep-1)/perStep; n["fills_device_at_step"] != fills ||
			!strings.Contains(f.Title, "fills at step") {
			t.Errorf("%s cut: fills at %d, want %d: %s", c.name, n["fills_device_at_step"], fills, f.Title)
		}
	}
}

// leak_steps keeps each step's 2 MiB output in a list (record_examples.py:87,
// the leak its run measured). With the list cleared after the loop it is no
// leak, but the peak still holds the outputs of all 8 steps: loop
// accumulation, 2 MiB (the leak the run measured) per iteration, and with a
// 1 GiB device, the iteration at which a longer loop would fill it.
func TestLoopAccumulationListClearedAfterLoop(t *testing.T) {
	r := variant(t, "leak_steps", analyze.Options{DeviceMemory: 1 << 30}, "release", "record_examples.py:87")
	if got := strings.Join(kinds(r), " "); got != analyze.KindLoopAccumulation {
		t.Fatalf("leak_steps with its list cleared: %q", got)
	}
	f := one(t, r, analyze.KindLoopAccumulation)
	n := f.Evidence.Numbers
	want := readSidecar(t, "leak_steps").LeakPerStep
	if filepath.Base(f.File) != "record_examples.py" || f.Line != 87 || n["bytes_per_iteration"] != want ||
		n["iterations_alive_at_peak"] != 8 || n["iterations_run_by_peak"] != 8 || n["freed_after_peak"] != n["bytes"] {
		t.Errorf("%s:%d %v (the run leaked %d a step)", f.File, f.Line, n, want)
	}
	if fills := 7 + (1<<30-r.Peak.Bytes+want-1)/want; n["fills_device_at_step"] != fills {
		t.Errorf("fills at iteration %d, want %d", n["fills_device_at_step"], fills)
	}
	// The same recorded without annotations: the iterations come from periodicity.
	dir := t.TempDir()
	plain, cleared := filepath.Join(dir, "plain.pickle"), filepath.Join(dir, "cleared.pickle")
	snaptool(t, "strip", pathOf(t, "leak_steps"), plain)
	snaptool(t, "release", plain, "record_examples.py:87", cleared)
	p, err := analyze.Run(cleared, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.StepSource != analyze.StepsFromPeriodicity || len(p.Steps) < 7 {
		t.Fatalf("without annotations: %d steps from %q", len(p.Steps), p.StepSource)
	}
	g := one(t, p, analyze.KindLoopAccumulation)
	if g.Line != 87 || g.Evidence.Numbers["bytes_per_iteration"] != want || g.Evidence.Numbers["iterations_alive_at_peak"] < 7 {
		t.Errorf("without annotations: %d %v", g.Line, g.Evidence.Numbers)
	}
}

// A forward pass whose layers each keep their activations looks like a loop
// that keeps part of every iteration. too_big's first forward (24 GPT-2
// layers, 340 MB kept a layer) ran out of memory and never gave them back:
// no steps, so no leak is read into it.
func TestForwardCutByOOMIsNoLoop(t *testing.T) {
	var r *analyze.Result
	for _, e := range expectations(t) {
		if e.Name == "too_big" {
			r, _ = analyseLabelled(t, e)
		}
	}
	if r == nil {
		t.Fatal("too_big is not labelled or not here")
	}
	if len(r.Steps) != 0 || len(findingsOf(r, analyze.KindLeak)) != 0 {
		t.Errorf("too_big: %d steps (%s), findings %v", len(r.Steps), r.StepSource, kinds(r))
	}
}

// A cache keyed by length, dumped at every step end: from the first step
// that made no new entry (a hit; a leak adds something on every step) it is never
// a leak, and it is exactly one cache finding at the cache's line —
// unbounded_cache while it grows, cache_growth once it has been quiet.
func TestCacheDumpedAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("33 cuts of two recordings (about 10 s on 2 cores)")
	}
	for _, c := range []struct {
		name     string
		line     int
		firstHit int // the first step that added no entry (record_findings.py's schedules)
	}{
		{"cache_growth", 168, 4},
		{"cache_infer", 282, 4},
	} {
		full := result(t, c.name)
		var seen []string
		for k := c.firstHit + 1; k < len(full.Steps); k++ {
			r := variant(t, c.name, analyze.Options{}, "cut", strconv.FormatInt(full.Steps[k].EndUS, 10))
			var kind string
			for _, f := range r.Findings {
				switch f.Kind {
				case analyze.KindLeak, analyze.KindLoopAccumulation:
					t.Errorf("%s cut after step %d: %s %s", c.name, k, f.Kind, f.Title)
				case analyze.KindCacheGrowth, analyze.KindUnboundedCache:
					if kind != "" || f.Line != c.line {
						t.Errorf("%s cut after step %d: a second cache finding or another line: %s", c.name, k, f.Title)
					}
					kind = f.Kind
				}
			}
			if len(seen) == 0 || seen[len(seen)-1] != kind {
				seen = append(seen, kind)
			}
		}
		if got := strings.Join(seen, " then "); got != "unbounded_cache then cache_growth" {
			t.Errorf("%s dumped after each step: %s", c.name, got)
		}
	}
}

// One training step of GPT-2 (12 layers) recorded without annotations: its
// forward keeps each layer's activations and its backward gives them all
// back, which looks like a loop that keeps and then frees. It has
// backward's frameless allocations, so no keeping loop is looked for: no
// steps, no leak (a first version found the 12 layers as 12 iterations).
func TestOneTrainingStepIsNoLoop(t *testing.T) {
	full := result(t, "gpt2_12l_python_stacks")
	dir := t.TempDir()
	plain, first := filepath.Join(dir, "plain.pickle"), filepath.Join(dir, "first.pickle")
	snaptool(t, "strip", pathOf(t, "gpt2_12l_python_stacks"), plain)
	snaptool(t, "cut", plain, strconv.FormatInt(full.Steps[0].EndUS, 10), first)
	r, err := analyze.Run(first, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 0 || len(r.Findings) != 0 {
		t.Errorf("the first step alone: %d steps (%s), findings %v", len(r.Steps), r.StepSource, kinds(r))
	}
}
