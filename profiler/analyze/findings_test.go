package analyze_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

func findingsOf(r *analyze.Result, kind string) []analyze.Finding {
	var out []analyze.Finding
	for _, f := range r.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func one(t *testing.T, r *analyze.Result, kind string) analyze.Finding {
	t.Helper()
	fs := findingsOf(r, kind)
	if len(fs) != 1 {
		t.Fatalf("%s: %d %s findings, want 1: %v", filepath.Base(r.File), len(fs), kind, kinds(r))
	}
	return fs[0]
}

func kinds(r *analyze.Result) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Kind)
	}
	sort.Strings(out)
	return out
}

func hasLine(f analyze.Finding, base string, line int) bool {
	for _, l := range f.Evidence.Lines {
		if filepath.Base(l.File) == base && l.Line == line {
			return true
		}
	}
	return false
}

// What each real snapshot is diagnosed with: every kind fires where the run
// had that problem and nowhere else. optimizer_state is info: it fires on an
// AdamW run whose state is a quarter of the peak (the small MLPs), not on the
// GPT-2 runs (11-14%).
func TestFindingKindsOnRealSnapshots(t *testing.T) {
	want := map[string]string{
		"gpt2_train":             "",
		"llama_lora_gc":          "",
		"oom_batch":              "activation_peak large_allocation oom",
		"gpt2_12l_python_stacks": "",
		"example_train":          "",
		"leak_steps":             "leak",
		"expandable":             "optimizer_state",
		"cuda_graph":             "",
		"agent_gpt2":             "",
		"agent_oom":              "activation_peak large_allocation oom",
		"leak_graph":             "leak optimizer_state",
		"leak_infer":             "leak",
		"frag_oom":               "fragmentation oom",
		"frag_oom_expandable":    "",
		"cache_growth":           "cache_growth optimizer_state",
		"activation_oom":         "activation_peak oom",
		"attn_oom":               "large_allocation oom",
		"healthy_mlp":            "optimizer_state",
		"cache_infer":            "cache_growth",
		"healthy_infer":          "",
	}
	for _, in := range inputs(t) {
		w, ok := want[in.name]
		if !ok {
			t.Errorf("%s: no expectation", in.name)
			continue
		}
		if got := strings.Join(kinds(result(t, in.name)), " "); got != w {
			t.Errorf("%s: findings %q, want %q", in.name, got, w)
		}
	}
}

// Healthy runs — the shared fixtures' and the ones recorded for this — get
// nothing above info: no oom, leak, fragmentation, large_allocation,
// activation_peak or warning-level cache.
func TestHealthyRunsOnlyInfo(t *testing.T) {
	for _, name := range []string{"gpt2_train", "llama_lora_gc", "gpt2_12l_python_stacks", "example_train", "agent_gpt2",
		"healthy_mlp", "healthy_infer", "frag_oom_expandable", "expandable", "cuda_graph"} {
		for _, f := range result(t, name).Findings {
			if f.Severity != "info" {
				t.Errorf("%s: %s %s: %s", name, f.Severity, f.Kind, f.Title)
			}
		}
	}
}

// Every finding carries a title, a place, numbers and source lines to check,
// and a fix.
func TestFindingsCarryEvidence(t *testing.T) {
	for _, in := range inputs(t) {
		for _, f := range result(t, in.name).Findings {
			switch f.Severity {
			case "error", "warning", "info":
			default:
				t.Errorf("%s: %s severity %q", in.name, f.Kind, f.Severity)
			}
			if f.Title == "" || f.Fix == "" || f.File == "" || f.Line <= 0 || len(f.Evidence.Numbers) == 0 || len(f.Evidence.Lines) == 0 {
				t.Errorf("%s: %s lacks title, place, numbers, lines or fix: %+v", in.name, f.Kind, f)
			}
			for _, l := range f.Evidence.Lines {
				if l.File == "" || l.Line <= 0 || l.Note == "" {
					t.Errorf("%s: %s evidence line %+v", in.name, f.Kind, l)
				}
			}
		}
	}
}

// oom_batch: the 1.53 GiB of fp32 logits for a 50,257-word vocabulary,
// allocated in transformers' loss_utils.py:59, reached from train_gpt2.py:22.
// agent_oom is the same failure recorded by the agent (examples/e2e/train.py:28).
func TestLargeAllocation(t *testing.T) {
	for _, c := range []struct {
		name, file string
		line       int
	}{{"oom_batch", "train_gpt2.py", 22}, {"agent_oom", "train.py", 28}} {
		r := result(t, c.name)
		f := one(t, r, analyze.KindLargeAllocation)
		if filepath.Base(f.File) != c.file || f.Line != c.line || !hasLine(f, "loss_utils.py", 59) || !hasLine(f, c.file, c.line) {
			t.Errorf("%s: large_allocation at %s:%d with lines %+v; want %s:%d reached through loss_utils.py:59", c.name, f.File, f.Line, f.Evidence.Lines, c.file, c.line)
		}
		if f.Evidence.Numbers["bytes"] != 1646821376 || r.OOMs[0].Requested != 1646821376 {
			t.Errorf("%s: %d bytes, the OOM entry asked for 1646821376", c.name, f.Evidence.Numbers["bytes"])
		}
		if s := f.Evidence.Numbers["share_pct"]; s < 20 || s > 26 {
			t.Errorf("%s: share %d%% of allocated+request (1.53 of 6.67 GiB is 23%%)", c.name, s)
		}
		if !strings.Contains(f.Fix, "chunk") || !strings.Contains(f.Title, "loss_utils.py:59") {
			t.Errorf("%s: title %q fix %q", c.name, f.Title, f.Fix)
		}
		if o := one(t, r, analyze.KindOOM); o.Cause != analyze.KindLargeAllocation {
			t.Errorf("%s: oom cause %q", c.name, o.Cause)
		}
		// Activations are 63% of what was needed, but not the cause: a warning.
		if a := one(t, r, analyze.KindActivationPeak); a.Severity != "warning" {
			t.Errorf("%s: activation_peak beside a large allocation is %s", c.name, a.Severity)
		}
	}
}

// attn_oom (held out of the threshold: it was recorded to test the rule, not
// to set it): naive attention asks for the 2x8x8192x8192 fp32 score matrix,
// 4 GiB, at the scores line of Attention.forward (record_findings.py:219).
func TestLargeAllocationAttention(t *testing.T) {
	r := result(t, "attn_oom")
	f := one(t, r, analyze.KindLargeAllocation)
	if filepath.Base(f.File) != "record_findings.py" || f.Line != 219 || f.Evidence.Numbers["bytes"] != 4<<30 {
		t.Errorf("large_allocation %s:%d of %d bytes, want record_findings.py:219 and 4 GiB", f.File, f.Line, f.Evidence.Numbers["bytes"])
	}
	if o := one(t, r, analyze.KindOOM); o.Cause != analyze.KindLargeAllocation {
		t.Errorf("oom cause %q", o.Cause)
	}
	if !strings.Contains(f.Fix, "scaled_dot_product_attention") {
		t.Errorf("fix %q", f.Fix)
	}
}

// frag_oom: 537 MiB reserved but unallocated in holes of 20-52 MiB, and a
// 256 MiB request failed under the 1.25 GiB cap. PyTorch's own message gives
// the figures. The same run with expandable segments did not fail.
func TestFragmentation(t *testing.T) {
	r := result(t, "frag_oom")
	sc := readSidecar(t, "frag_oom")
	f := one(t, r, analyze.KindFragmentation)
	n := f.Evidence.Numbers
	if n["requested"] != sc.Requested || n["largest_free_block"] >= n["requested"] || n["reserved_unallocated"] < n["requested"] {
		t.Errorf("numbers %v: want a %d request, more than that free, no free block that large", n, sc.Requested)
	}
	m := regexp.MustCompile(`and (\S+ \S+) is reserved by PyTorch but unallocated`).FindStringSubmatch(sc.OOMMessage)
	if m == nil || profiler.FormatBytes(n["reserved_unallocated"]) != m[1] {
		t.Errorf("reserved but unallocated %s; PyTorch said %v", profiler.FormatBytes(n["reserved_unallocated"]), m)
	}
	if n["largest_free_block"] != 52<<20 {
		t.Errorf("largest free block %d, the largest hole was 52 MiB", n["largest_free_block"])
	}
	if filepath.Base(f.File) != "record_findings.py" || f.Line != 145 {
		t.Errorf("at %s:%d, the 256 MiB request is record_findings.py:145", f.File, f.Line)
	}
	if !strings.Contains(f.Fix, "expandable_segments:True") || strings.Contains(f.Fix, "already on") {
		t.Errorf("fix %q", f.Fix)
	}
	if o := one(t, r, analyze.KindOOM); o.Cause != analyze.KindFragmentation {
		t.Errorf("oom cause %q", o.Cause)
	}
	if len(findingsOf(r, analyze.KindLargeAllocation)) != 0 {
		t.Error("a fragmented OOM is not a large allocation: the memory was there")
	}

	e := result(t, "frag_oom_expandable")
	if !e.Settings.ExpandableSegments || len(e.OOMs) != 0 || len(e.Findings) != 0 {
		t.Errorf("frag_oom_expandable: expandable %v, %d OOMs, findings %v", e.Settings.ExpandableSegments, len(e.OOMs), kinds(e))
	}

	// With the setting already on, the fix says so instead of suggesting it.
	out := filepath.Join(t.TempDir(), "frag_on.pickle")
	snaptool(t, "expandable", pathOf(t, "frag_oom"), out)
	on, err := analyze.Run(out, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := one(t, on, analyze.KindFragmentation); !strings.Contains(f.Fix, "already on") || f.Evidence.Numbers["expandable_segments"] != 1 {
		t.Errorf("with expandable_segments set: fix %q, numbers %v", f.Fix, f.Evidence.Numbers)
	}
}

// activation_oom: a 32-layer MLP without checkpointing ran out in the forward
// pass of a 16k batch; 83% of what it needed were activations, attributed to
// torch.nn's Linear and GELU forwards and to the line that called the model.
func TestActivationPeak(t *testing.T) {
	r := result(t, "activation_oom")
	f := one(t, r, analyze.KindActivationPeak)
	if f.Severity != "error" || f.Evidence.Numbers["share_pct"] < 75 {
		t.Errorf("%s, %d%% activations", f.Severity, f.Evidence.Numbers["share_pct"])
	}
	if filepath.Base(f.File) != "record_findings.py" || f.Line != 196 || !hasLine(f, "linear.py", 134) || !hasLine(f, "activation.py", 816) {
		t.Errorf("at %s:%d with %+v; want record_findings.py:196 and the Linear and GELU forwards", f.File, f.Line, f.Evidence.Lines)
	}
	if !strings.Contains(f.Fix, "checkpoint_sequential") {
		t.Errorf("fix %q", f.Fix)
	}
	if o := one(t, r, analyze.KindOOM); o.Cause != analyze.KindActivationPeak || o.Evidence.Numbers["allocated_activation"] != f.Evidence.Numbers["activation_bytes"] {
		t.Errorf("oom cause %q, numbers %v", o.Cause, o.Evidence.Numbers)
	}
}

// Without an OOM, activation_peak and large_allocation need the device's
// memory and a peak within 90% of it: the healthy gpt2_train is the same run
// whether it had 8% or 95% of the device, and only the second is a problem.
func TestNearCapacity(t *testing.T) {
	path := pathOf(t, "gpt2_train")
	need(t, path)
	peak := result(t, "gpt2_train").Peak.Bytes
	tight, err := analyze.Run(path, analyze.Options{DeviceMemory: peak * 100 / 95})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds(tight), " "); got != "activation_peak large_allocation" {
		t.Errorf("at 95%% of the device: %q", got)
	}
	if f := one(t, tight, analyze.KindLargeAllocation); f.Evidence.Numbers["bytes"] != 823410688 || !hasLine(f, "train_gpt2.py", 22) {
		t.Errorf("large_allocation %v %+v; want the 823 MB fp32 logits from train_gpt2.py:22", f.Evidence.Numbers, f.Evidence.Lines)
	}
	roomy, err := analyze.Run(path, analyze.Options{DeviceMemory: peak * 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds(roomy), " "); got != "" {
		t.Errorf("at 10%% of the device: %q", got)
	}
}

// leak_steps kept each step's 2 MiB output; leak_graph kept a validation
// loss with its graph every step (7 MiB of saved activations, the growth of
// memory_allocated() between its steps). The sites are the lines that made
// the kept blocks.
func TestLeak(t *testing.T) {
	for _, c := range []struct {
		name, file string
		line       int
		perStep    func(sidecar) int64
	}{
		{"leak_steps", "record_examples.py", 87, func(s sidecar) int64 { return s.LeakPerStep }},
		{"leak_graph", "record_findings.py", 105, func(s sidecar) int64 { return s.AfterStep[5] - s.AfterStep[4] }},
	} {
		r := result(t, c.name)
		f := one(t, r, analyze.KindLeak)
		want := c.perStep(readSidecar(t, c.name))
		if f.Evidence.Numbers["growth_per_step"] != want {
			t.Errorf("%s: growth %d per step, the run measured %d", c.name, f.Evidence.Numbers["growth_per_step"], want)
		}
		if filepath.Base(f.File) != c.file || f.Line != c.line || !hasLine(f, c.file, c.line) {
			t.Errorf("%s: at %s:%d, lines %+v; want %s:%d", c.name, f.File, f.Line, f.Evidence.Lines, c.file, c.line)
		}
		if !strings.Contains(f.Title, "device memory is unknown") {
			t.Errorf("%s: without the device memory the title should say so: %q", c.name, f.Title)
		}
		// The same leak without annotations: steps from periodicity.
		p := stripped(t, c.name, analyze.Options{})
		if g := one(t, p, analyze.KindLeak); g.Evidence.Numbers["growth_per_step"] != want || g.Line != c.line {
			t.Errorf("%s without annotations: %v at %d", c.name, g.Evidence.Numbers, g.Line)
		}
	}
	// With the device memory known: when it fills.
	path := pathOf(t, "leak_graph")
	r, err := analyze.Run(path, analyze.Options{DeviceMemory: 80 << 30})
	if err != nil {
		t.Fatal(err)
	}
	f := one(t, r, analyze.KindLeak)
	last := r.Steps[len(r.Steps)-1]
	g := f.Evidence.Numbers["growth_per_step"]
	want := int64(len(r.Steps)-1) + (80<<30-last.PeakBytes+g-1)/g
	if f.Evidence.Numbers["fills_device_at_step"] != want || !strings.Contains(f.Title, fmt.Sprintf("fills at step %d", want)) {
		t.Errorf("fills at %d (%q), want step %d", f.Evidence.Numbers["fills_device_at_step"], f.Title, want)
	}
	// A healthy loop without annotations is no leak either.
	for _, name := range []string{"gpt2_train", "llama_lora_gc", "healthy_mlp"} {
		if p := stripped(t, name, analyze.Options{}); len(findingsOf(p, analyze.KindLeak)) != 0 {
			t.Errorf("%s without annotations: leak", name)
		}
	}
}

// leak_infer (held back: recorded to test the rules, none tuned on it): an
// inference loop with no optimizer keeps each 512 KiB prediction.
func TestLeakHeldBack(t *testing.T) {
	r := result(t, "leak_infer")
	f := one(t, r, analyze.KindLeak)
	if f.Evidence.Numbers["growth_per_step"] != readSidecar(t, "leak_infer").LeakPerStep ||
		filepath.Base(f.File) != "record_findings.py" || f.Line != 122 {
		t.Errorf("leak %v at %s:%d; want 524288 per step at record_findings.py:122 (y = model(x))", f.Evidence.Numbers, f.File, f.Line)
	}
	if h := result(t, "healthy_infer"); len(h.Findings) != 0 {
		t.Errorf("healthy_infer: %v", kinds(h))
	}
}

// cache_growth keeps a table per sequence length (8 lengths, the last new one
// at step 10 of 24); cache_infer a causal mask per length (6 lengths, the
// last new at iteration 7 of 18, no optimizer). The finding has the cache's
// size and its line; neither is a leak. (cache_infer's steps come from
// periodicity; a mask made at the top of iteration 7, before the loop's
// input, counts in step 7: an iteration ends before the one-time
// allocations that open the next.)
func TestCacheGrowth(t *testing.T) {
	for _, c := range []struct {
		name string
		line int
		last int64
	}{{"cache_growth", 168, 10}, {"cache_infer", 282, 7}} {
		r := result(t, c.name)
		sc := readSidecar(t, c.name)
		f := one(t, r, analyze.KindCacheGrowth)
		n := f.Evidence.Numbers
		if n["sizes"] != int64(sc.DistinctLengths) || n["blocks"] != int64(sc.DistinctLengths) || n["bytes"] != sc.CacheBytes || n["last_new_step"] != c.last {
			t.Errorf("%s: %v; the run cached %d lengths, %d bytes", c.name, n, sc.DistinctLengths, sc.CacheBytes)
		}
		if filepath.Base(f.File) != "record_findings.py" || f.Line != c.line {
			t.Errorf("%s: at %s:%d, want record_findings.py:%d", c.name, f.File, f.Line, c.line)
		}
		if len(findingsOf(r, analyze.KindLeak)) != 0 {
			t.Errorf("%s: a cache that stopped growing is not a leak", c.name)
		}
	}
}

// AdamW keeps two fp32 moments per parameter. gpt2_train: GPT-2's 76
// parameter tensors (81,912,576 parameters, 6 layers), 2 x 4 x 81,912,576
// bytes of state at the peak, 11% of it: below the finding's quarter.
// healthy_mlp: three 1024-4096-1024 blocks (25,181,184 parameters in 12
// tensors), state 35% of the peak: an info finding.
func TestOptimizerState(t *testing.T) {
	const gpt2 = 50257*768 + 1024*768 + 6*(2*768+768*2304+2304+768*768+768+2*768+768*3072+3072+3072*768+768) + 2*768
	r := result(t, "gpt2_train")
	if got := catOf(r, analyze.CatOptimizerState); got != 2*4*gpt2 {
		t.Errorf("gpt2_train: optimizer_state %d at the peak, AdamW keeps %d", got, 2*4*gpt2)
	}
	if len(findingsOf(r, analyze.KindOptimizerState)) != 0 {
		t.Error("gpt2_train: optimizer_state finding at 11% of the peak")
	}
	const mlp = 3 * (1024*4096 + 4096 + 4096*1024 + 1024)
	r = result(t, "healthy_mlp")
	f := one(t, r, analyze.KindOptimizerState)
	if f.Evidence.Numbers["bytes"] != 2*4*mlp || f.Evidence.Numbers["tensors"] != 2*12 || f.Severity != "info" {
		t.Errorf("state %v, want %d bytes in 24 tensors", f.Evidence.Numbers, 2*4*mlp)
	}
	if !strings.Contains(f.Title, "AdamW") || !hasLine(f, "record_findings.py", 264) || !hasLine(f, "adam.py", 178) {
		t.Errorf("%q %+v", f.Title, f.Evidence.Lines)
	}
	if got := catOf(r, analyze.CatOptimizerState); got != f.Evidence.Numbers["bytes"] {
		t.Errorf("optimizer_state category %d, finding %d", got, f.Evidence.Numbers["bytes"])
	}
}

func catOf(r *analyze.Result, name string) int64 {
	for _, c := range r.Categories {
		if c.Name == name {
			return c.Bytes
		}
	}
	return -1
}

// The categories at the peak add up to the peak; inference has no gradients
// or optimizer state; a training run has all of them.
func TestCategories(t *testing.T) {
	for _, in := range inputs(t) {
		r := result(t, in.name)
		var sum int64
		for _, c := range r.Categories {
			sum += c.Bytes
		}
		if sum != r.Peak.Bytes {
			t.Errorf("%s: categories sum to %d, the peak is %d", in.name, sum, r.Peak.Bytes)
		}
	}
	for _, name := range []string{"leak_infer", "healthy_infer", "cache_infer"} {
		r := result(t, name)
		if catOf(r, analyze.CatGradient) != 0 || catOf(r, analyze.CatOptimizerState) != 0 || catOf(r, analyze.CatActivation) != 0 {
			t.Errorf("%s: inference with gradients, optimizer state or activations: %+v", name, r.Categories)
		}
	}
	for _, name := range []string{"gpt2_train", "example_train", "healthy_mlp", "leak_graph", "agent_gpt2"} {
		r := result(t, name)
		for _, c := range []string{analyze.CatParameter, analyze.CatGradient, analyze.CatOptimizerState, analyze.CatActivation} {
			if catOf(r, c) <= 0 {
				t.Errorf("%s: no %s at the peak: %+v", name, c, r.Categories)
			}
		}
	}
	// gpt2_train's peak is in the forward/backward turn: activations lead.
	r := result(t, "gpt2_train")
	if a := catOf(r, analyze.CatActivation); 2*a < r.Peak.Bytes {
		t.Errorf("gpt2_train: activations %d of a %d peak", a, r.Peak.Bytes)
	}
}

// The JSON has steps, step_source and categories, as arrays even when empty.
func TestFindingsJSON(t *testing.T) {
	for _, name := range []string{"cuda_graph", "leak_steps"} {
		b, err := json.Marshal(result(t, name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"steps", "step_source", "categories", "findings"} {
			if v, ok := m[k]; !ok || string(v) == "null" {
				t.Errorf("%s: %q is %s", name, k, v)
			}
		}
	}
}

// The diagnosis of every real snapshot, as a golden file: steps, categories at
// the peak, and each finding with its numbers and lines.
func TestGoldenFindings(t *testing.T) {
	var b bytes.Buffer
	for _, in := range inputs(t) {
		need(t, in.path)
		r := result(t, in.name)
		fmt.Fprintf(&b, "== %s: %d steps (%s)", in.name, len(r.Steps), r.StepSource)
		for _, c := range r.Categories {
			fmt.Fprintf(&b, " %s=%d", c.Name, c.Bytes)
		}
		fmt.Fprintln(&b)
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "%s %s", f.Severity, f.Kind)
			if f.Cause != "" {
				fmt.Fprintf(&b, " (cause %s)", f.Cause)
			}
			fmt.Fprintf(&b, " at %s:%d: %s\n", filepath.Base(f.File), f.Line, f.Title)
			var keys []string
			for k := range f.Evidence.Numbers {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteString("   ")
			for _, k := range keys {
				fmt.Fprintf(&b, " %s=%d", k, f.Evidence.Numbers[k])
			}
			b.WriteString("\n")
			for _, l := range f.Evidence.Lines {
				fmt.Fprintf(&b, "    %s:%d %d %s\n", filepath.Base(l.File), l.Line, l.Bytes, l.Note)
			}
		}
	}
	golden.Check(t, "findings.golden", b.Bytes())
}
