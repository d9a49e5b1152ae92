package analyze_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

func category(d analyze.Device, name string) (int64, bool) {
	for _, c := range d.Categories {
		if c.Name == name {
			return c.Bytes, true
		}
	}
	return 0, false
}

// TestKVCacheFromCacheCode: a generate() recording (record_piles.py's
// healthy_kv_generate: Llama, 4 layers, 512 wide, fp32, batch 16, 32 prompt
// tokens, 64 new) holds at its peak the cache of 95 tokens (the last token
// is never fed back): 16 x 95 x (4 layers x keys and values x 512 x 4 bytes),
// allocated by transformers' cache code. Training runs that fill a cache in
// their forward (use_cache) keep those blocks as activations.
func TestKVCacheFromCacheCode(t *testing.T) {
	path := filepath.Join(findingDir, "healthy_kv_generate.pickle")
	need(t, path)
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := category(deviceOf(t, r, 0), analyze.CatKVCache)
	if want := int64(16 * 95 * 4 * 2 * 512 * 4); !ok || got != want {
		t.Errorf("kv_cache at the peak = %d (reported %v), want %d", got, ok, want)
	}
	for _, name := range []string{"gpt2_train", "agent_gpt2", "example_train"} {
		r := result(t, name)
		for _, d := range r.Devices {
			if _, ok := category(d, analyze.CatKVCache); ok {
				t.Errorf("%s: a training run reports a kv_cache category", name)
			}
		}
	}
}

// TestGraphPoolCategory: the blocks of a CUDA graph's private pool are their
// own category: at the end of cuda_graph.pickle (nothing is freed after the
// peak there) it is every active block in a segment whose pool id is not (0, 0).
func TestGraphPoolCategory(t *testing.T) {
	path := filepath.Join(exampleDir, "cuda_graph.pickle")
	need(t, path)
	snap, err := torchsnap.ReadFile(path, profiler.NewFrames(), nil, torchsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pooled int64
	for _, s := range snap.Segments {
		if !s.PrivatePool() {
			continue
		}
		for _, b := range s.Blocks {
			if b.State == profiler.BlockActiveAllocated {
				pooled += int64(b.Size)
			}
		}
	}
	r := result(t, "cuda_graph")
	got, ok := category(deviceOf(t, r, 0), analyze.CatGraphPool)
	if !ok || got != pooled || pooled == 0 {
		t.Errorf("graph_pool = %d (reported %v), want the private pools' active blocks, %d", got, ok, pooled)
	}
	if _, ok := category(deviceOf(t, result(t, "gpt2_train"), 0), analyze.CatGraphPool); ok {
		t.Error("gpt2_train has no private pool but reports graph_pool")
	}
}

// kvEntries is a GPT-2-medium-shaped cache as the agent's walk names it:
// 24 layers of keys and values [batch, 16 heads, tokens, 64] in bf16.
func kvEntries(batch, tokens int64) []profiler.NamedTensor {
	var out []profiler.NamedTensor
	size := batch * 16 * tokens * 64 * 2
	for l := range 24 {
		for i, kv := range []string{"keys", "values"} {
			out = append(out, profiler.NamedTensor{Addr: uint64(0x100000 * (2*l + i + 1)), Bytes: size, Kind: "kv_cache",
				Name: fmt.Sprintf("past_key_values.layers[%d].%s in generate", l, kv), Shape: []int64{batch, 16, tokens, 64}})
		}
	}
	return out
}

// TestKVCacheSummaryAndFit: bytes per token over every layer (96 KiB for
// GPT-2 medium in bf16), the batch and length held, and what fits.
func TestKVCacheSummaryAndFit(t *testing.T) {
	kv := analyze.SummarizeKV(kvEntries(32, 700), 0)
	if kv == nil {
		t.Fatal("no KV cache summarised")
	}
	if kv.BytesPerToken != 96<<10 || kv.Batch != 32 || kv.Tokens != 700 || kv.Layers != 24 || kv.Tensors != 48 {
		t.Errorf("summary %+v", kv)
	}
	if kv.Bytes != 32*700*96<<10 || kv.Name != "past_key_values.layers[*].keys in generate" {
		t.Errorf("bytes %d name %q", kv.Bytes, kv.Name)
	}
	const gib = 1 << 30
	fit := kv.Fit(3*gib, 700<<20, 4<<20)
	// room 2.316 GiB; a sequence of 700 tokens: 4 MiB + 700 x 96 KiB x (1 + 1/48)
	perSeq := 4<<20 + 700*96*1024*(1+1.0/48)
	if want := int64(float64(3*gib-700<<20) / perSeq); fit.MaxBatch != want || want != 33 {
		t.Errorf("max batch %d, want %d", fit.MaxBatch, want)
	}
	if fit.MaxTokens != 732 { // (room / 32 - 4 MiB) / (96 KiB x 49/48)
		t.Errorf("max tokens at batch 32: %d", fit.MaxTokens)
	}
	if analyze.SummarizeKV(kvEntries(32, 700), 1) != nil {
		t.Error("a cache on device 0 summarised for device 1")
	}
	noShape := kvEntries(4, 8)
	for i := range noShape {
		noShape[i].Shape = nil
	}
	if analyze.SummarizeKV(noShape, 0) != nil {
		t.Error("entries without shapes (an older agent) give no batch and length")
	}
	if s := strings.TrimSpace(fmt.Sprint(fit.Limit)); s != fmt.Sprint(3*gib) {
		t.Errorf("limit %s", s)
	}
}

// TestOOMFindingKV: an OOM in generation that the agent named says what the
// KV cache held (batch x tokens from its shapes, bytes per token over every
// layer) and, in its fix, the largest batch at that length and the longest
// length at that batch within the memory the process had (snaptool.py's
// kv_oom: a cap, so the reserved memory, at most what the failing moment asked for).
func TestOOMFindingKV(t *testing.T) {
	r, _ := synth(t, "kv_oom")
	var oom *analyze.Finding
	for i := range r.Findings {
		if r.Findings[i].Kind == analyze.KindOOM {
			oom = &r.Findings[i]
		}
	}
	if oom == nil {
		t.Fatal("no OOM finding")
	}
	n := oom.Evidence.Numbers
	perToken := int64(2 * 2 * 4 * 64 * 2) // layers x (keys, values) x heads x head_dim x fp16
	if n["kv_batch"] != 8 || n["kv_tokens"] != 100 || n["kv_bytes_per_token"] != perToken || n["kv_layers"] != 2 {
		t.Errorf("numbers %v", n)
	}
	weights, kv := int64(32<<20), 8*100*perToken
	// The limit: the reservation, but never more than the failing moment asked
	// for (the allocated memory and the request did not fit).
	limit := min(n["reserved"], n["allocated"]+n["requested"]-1)
	if n["kv_cache_bytes"] != kv || n["fit_limit"] != limit {
		t.Errorf("cache %d limit %d, want %d (reserved %d)", n["kv_cache_bytes"], n["fit_limit"], limit, n["reserved"])
	}
	perSeq := (n["allocated"] + n["requested"] - kv - weights) / 8
	tok := float64(perToken) * 1.25 // one of the 4 tensors again while the cache grows
	room := float64(limit - weights)
	// It failed growing batch 8 to 101 tokens: what fits is below that, and not nothing.
	if want := int64(room / (float64(perSeq) + 100*tok)); n["fit_max_batch"] != want || want >= 8 || want < 4 {
		t.Errorf("max batch %d, want %d", n["fit_max_batch"], want)
	}
	if want := int64((room/8 - float64(perSeq)) / tok); n["fit_max_tokens"] != want || want > 100 || want < 50 {
		t.Errorf("max tokens %d, want %d", n["fit_max_tokens"], want)
	}
	if !strings.Contains(oom.Title, "the KV cache holds 1.56 MiB: batch 8 x 100 tokens, 2.00 KiB a token") {
		t.Errorf("title %q", oom.Title)
	}
	want := fmt.Sprintf("at 100 tokens a batch of %d fits, and at batch 8, %d tokens", n["fit_max_batch"], n["fit_max_tokens"])
	if !strings.HasPrefix(oom.Fix, "the KV cache (past_key_values.layers[*].keys in generate) takes 2.00 KiB a token") ||
		!strings.Contains(oom.Fix, want) || strings.Contains(oom.Fix, "checkpointing") {
		t.Errorf("fix %q", oom.Fix) // a capacity OOM in generation: no training advice
	}
	if got, _ := category(deviceOf(t, r, 0), analyze.CatKVCache); got != kv {
		t.Errorf("kv_cache category %d, want %d", got, kv)
	}
}

// TestGenerateModel: the what-if of generation reads off healthy_kv_generate
// (Llama, 4 layers, 512 wide, fp32; 16 x (32 + 64)) a cache of 16 KiB a
// token (4 layers x keys and values x 512 x 4 bytes, from its config), the
// weights as the parameters, and the recorded peak at the recorded size;
// a larger size adds what its sequences and tokens add, and the largest
// batch is the last one whose predicted peak fits.
func TestGenerateModel(t *testing.T) {
	path := filepath.Join(findingDir, "healthy_kv_generate.pickle")
	need(t, path)
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := analyze.ParseGenerateSize("16x32+64")
	if err != nil {
		t.Fatal(err)
	}
	m, err := analyze.GenerateModelOf(r, rec)
	if err != nil {
		t.Fatal(err)
	}
	params, _ := category(deviceOf(t, r, 0), analyze.CatParameter)
	if m.CacheToken != 4*2*512*4 || m.Weights != params || m.Peak != r.Peak.Bytes {
		t.Errorf("model %+v (parameters %d, peak %d)", m, params, r.Peak.Bytes)
	}
	if got := m.PeakAt(rec); got < r.Peak.Bytes-r.Peak.Bytes/100 || got > r.Peak.Bytes {
		t.Errorf("at the recorded size %d, recorded %d", got, r.Peak.Bytes)
	}
	double := m.PeakAt(analyze.GenerateSize{Batch: 32, Prompt: 32, New: 64})
	if want := m.Weights + 2*(m.PeakAt(rec)-m.Weights); double != want {
		t.Errorf("twice the batch: %d, want %d", double, want)
	}
	longer := m.PeakAt(analyze.GenerateSize{Batch: 16, Prompt: 32, New: 164})
	if want := m.PeakAt(rec) + 16*100*m.CacheToken; longer != want {
		t.Errorf("100 more tokens: %d, want %d", longer, want)
	}
	limit := int64(1 << 30)
	b := m.LargestBatch(rec, limit)
	if b <= 16 || m.PeakAt(analyze.GenerateSize{Batch: b, Prompt: 32, New: 64}) > limit ||
		m.PeakAt(analyze.GenerateSize{Batch: b + 1, Prompt: 32, New: 64}) <= limit {
		t.Errorf("largest batch %d in 1 GiB", b)
	}
	for _, bad := range []string{"16x32", "0x32+64", "16x32+-1", "a"} {
		if _, err := analyze.ParseGenerateSize(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := analyze.GenerateModelOf(result(t, "gpt2_train"), rec); err == nil {
		t.Error("a training run gave a generation model")
	}
}

// TestEvalLoopOverLayers: an evaluation loop over a 12-layer model keeping
// every batch's logits (snaptool.py's eval_keep_layers, 24 batches) has 24
// iterations, not one per layer (288: the layers' stacks make nearly every
// allocation and their windows sit lower as the kept logits pile up), and
// its accumulation is found on the loop's line with what each batch kept.
func TestEvalLoopOverLayers(t *testing.T) {
	r, _ := synth(t, "eval_keep_layers")
	if n := len(deviceOf(t, r, 0).Steps); n != 24 {
		t.Errorf("%d iterations, want the 24 batches", n)
	}
	var found bool
	for _, f := range r.Findings {
		if f.Kind == analyze.KindLoopAccumulation {
			found = true
			if filepath.Base(f.File) != "eval.py" || f.Line != 19 || !strings.Contains(f.Title, "keeps 100.00 MiB per iteration") {
				t.Errorf("finding at %s:%d: %s", f.File, f.Line, f.Title)
			}
		}
	}
	if !found {
		t.Errorf("no loop_accumulation: %v", r.Findings)
	}
}
