package analyze

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// KVCache is a device's key/value cache at the snapshot, from the agent's
// walk: every tensor of kind kv_cache, shaped [batch, heads, seq, head_dim]
// (jupyter/vramscope/agent/_tensors.py). BytesPerToken is what one more token of
// one sequence adds over every layer's keys and values: the figure that
// says which batch and length fit.
type KVCache struct {
	Name          string `json:"name"` // the largest group ("cache.layers[*].keys")
	Bytes         int64  `json:"bytes"`
	Tensors       int    `json:"tensors"`
	Layers        int    `json:"layers"`
	Batch         int64  `json:"batch"`
	Tokens        int64  `json:"tokens"` // the sequence length it holds (a static cache: its capacity)
	BytesPerToken int64  `json:"bytes_per_token"`
	// Filled is how many layers held keys when the cache was only partly
	// filled (a failure inside the prompt's forward), 0 when every layer the
	// model has did; Layers and BytesPerToken then count every layer.
	Filled int `json:"filled_layers,omitempty"`
}

// kvCache sums the KV cache named on dev; nil when the walk named none with
// a [batch, heads, seq, head_dim] shape.
func (a *analysis) kvCache(dev int) *KVCache {
	if a.names == nil {
		return nil
	}
	return SummarizeKV(a.names.walk.Entries, dev)
}

// SummarizeKV sums the entries of kind kv_cache on dev.
func SummarizeKV(entries []profiler.NamedTensor, dev int) *KVCache {
	kv := &KVCache{}
	perToken := 0.0
	groups := map[string]int64{}
	for _, e := range entries {
		if e.Kind != "kv_cache" || e.Device != dev || len(e.Shape) != 4 || e.Shape[0] <= 0 || e.Shape[2] <= 0 {
			continue
		}
		kv.Bytes += e.Bytes
		kv.Tensors++
		kv.Batch = max(kv.Batch, e.Shape[0])
		kv.Tokens = max(kv.Tokens, e.Shape[2])
		perToken += float64(e.Bytes) / float64(e.Shape[0]*e.Shape[2])
		groups[groupName(e.Name)] += e.Bytes
	}
	if kv.Tensors == 0 {
		return nil
	}
	kv.Layers = max(1, kv.Tensors/2) // a key and a value per layer
	if all := modelLayers(entries, dev); all > kv.Layers {
		// The prompt's forward failed before the later layers stored their
		// keys: each token will cost what every layer stores.
		perToken *= float64(all) / float64(kv.Layers)
		kv.Filled, kv.Layers = kv.Layers, all
	}
	kv.BytesPerToken = int64(perToken + 0.5)
	kv.Name = largestGroup(groups)
	return kv
}

// moduleListIndex is a module list's index in a parameter's name: "h.23." in
// "model.transformer.h.23.attn.c_attn.weight", "layers.7." in Llama's.
var moduleListIndex = regexp.MustCompile(`^(.*?\.)(\d+)\.`)

// modelLayers is how many blocks the model's largest module list holds, by
// its parameters' names (0 when no parameter is indexed).
func modelLayers(entries []profiler.NamedTensor, dev int) int {
	seen := map[string]map[string]bool{}
	most := 0
	for _, e := range entries {
		if e.Kind != "parameter" || e.Device != dev {
			continue
		}
		m := moduleListIndex.FindStringSubmatch(e.Name)
		if m == nil {
			continue
		}
		if seen[m[1]] == nil {
			seen[m[1]] = map[string]bool{}
		}
		seen[m[1]][m[2]] = true
		most = max(most, len(seen[m[1]]))
	}
	return most
}

func largestGroup(groups map[string]int64) string {
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if groups[names[i]] != groups[names[j]] {
			return groups[names[i]] > groups[names[j]]
		}
		return names[i] < names[j]
	})
	return names[0]
}

// KVFit is what fits a memory limit, by the KV cache's size per token: the
// largest batch at the cache's length and the longest sequence at its batch.
type KVFit struct {
	Limit     int64 `json:"limit"`
	Fixed     int64 `json:"fixed"`      // what does not grow with the batch (weights, graph pools)
	PerSeq    int64 `json:"per_seq"`    // what one sequence holds besides its cache (activations, logits)
	MaxBatch  int64 `json:"max_batch"`  // at kv.Tokens
	MaxTokens int64 `json:"max_tokens"` // at kv.Batch
}

// Fit: memory(batch, tokens) = fixed + batch·(perSeq + tokens·bpt·(1 + 1/(2·layers))),
// the last term one layer's keys being copied as the cache grows by one
// token (torch.cat makes the longer tensor before it frees the old one).
func (kv *KVCache) Fit(limit, fixed, perSeq int64) KVFit {
	f := KVFit{Limit: limit, Fixed: fixed, PerSeq: perSeq}
	tok := float64(kv.BytesPerToken) * (1 + 1/(2*float64(kv.Layers)))
	room := float64(limit - fixed)
	if room <= 0 || tok <= 0 {
		return f
	}
	f.MaxBatch = int64(room / (float64(perSeq) + float64(kv.Tokens)*tok))
	if kv.Batch > 0 {
		f.MaxTokens = max(0, int64((room/float64(kv.Batch)-float64(perSeq))/tok))
	}
	return f
}

// kvShareMin: the KV cache speaks for an OOM when it holds at least 1/kvShareMin
// of the memory allocated at the failure beyond the weights and graph pools.
const kvShareMin = 5

// oomKV adds to an OOM finding what the KV cache held when it failed and
// which batch and length fit, for a snapshot the agent named at the failure.
// The limit is the reserved memory at the failure (a lower bound of the cap
// or the device), plus the device's free memory when that is what ran out,
// but never more than the failing moment asked for: the allocated memory
// and the request did not fit (when the reservation was larger, its free
// memory was in pieces), so the failing batch never reads as one that fits.
func (dg *devDiag) oomKV(f *Finding, od oomDiag) {
	kv := dg.d.KVCache
	if kv == nil || !od.atEnd || kv.Batch <= 0 {
		return
	}
	o := od.o
	fixed := catBytes(od.cats, CatParameter) + catBytes(od.cats, CatGraphPool)
	if kv.Bytes*kvShareMin < o.Allocated-fixed {
		// A cache a training forward keeps on the side (transformers' use_cache
		// in a fine-tune: 3% of a LoRA run's memory beyond its weights at its
		// OOM on the H200) is not what to size the batch by: the finding keeps
		// its own cause and fix.
		return
	}
	limit := o.Reserved
	if int64(o.DeviceFree) < o.Requested {
		limit += int64(o.DeviceFree)
	}
	limit = min(limit, o.Allocated+o.Requested-1)
	perSeq := max(0, (o.Allocated+o.Requested-kv.Bytes-fixed)/kv.Batch)
	fit := kv.Fit(limit, fixed, perSeq)
	n := f.Evidence.Numbers
	n["kv_cache_bytes"], n["kv_batch"], n["kv_tokens"], n["kv_bytes_per_token"] = kv.Bytes, kv.Batch, kv.Tokens, kv.BytesPerToken
	n["kv_layers"], n["fit_limit"], n["fit_max_batch"], n["fit_max_tokens"] = int64(kv.Layers), limit, fit.MaxBatch, fit.MaxTokens
	f.Title += fmt.Sprintf("; the KV cache holds %s: batch %d x %d tokens, %s a token", fb(kv.Bytes), kv.Batch, kv.Tokens,
		fb(kv.BytesPerToken))
	if f.Cause == "capacity" { // the generic tail speaks of training (checkpointing, optimizer state)
		f.Fix = kvFix(kv, fit) + "; or make the cache smaller per token (a quantized KV cache, fewer key/value heads) " +
			"or shard the model over more GPUs"
		return
	}
	f.Fix = kvFix(kv, fit) + "; " + f.Fix
}

// kvFix says which batch and length fit.
func kvFix(kv *KVCache, fit KVFit) string {
	return fmt.Sprintf("the KV cache (%s) takes %s a token for each sequence; in the %s the process could use, "+
		"at %d tokens a batch of %d fits, and at batch %d, %d tokens", kv.Name, fb(kv.BytesPerToken), fb(fit.Limit),
		kv.Tokens, fit.MaxBatch, kv.Batch, fit.MaxTokens)
}
