package analyze

import (
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// Inference memory (issue #27): a generating or serving program's memory is
// mostly weights and the KV cache, plus CUDA-graph pools where the forward
// is captured (torch.compile's reduce-overhead, torch.cuda.graphs). These two
// categories are reported only where a snapshot holds them, so a training
// run's categories read as before.
const (
	CatKVCache   = "kv_cache"   // a transformer's key/value cache: named by the agent's walk, or allocated by the cache's code
	CatGraphPool = "graph_pool" // blocks in a private pool's segments: CUDA graphs' memory, kept by design
)

// cacheFiles are the files whose code allocates a KV cache (transformers'
// DynamicCache/StaticCache layers grow or make their keys and values there).
var cacheFiles = []string{"transformers/cache_utils.py"}

// isKVCache reports whether a stack allocates in a KV cache's code.
func (lt *lifetimes) isKVCache(s profiler.StackID) bool {
	v, ok := lt.kvCode[s]
	if !ok {
		for _, id := range lt.a.frames.StackAt(s) {
			if isCacheFile(lt.a.frames.FrameAt(id).File) {
				v = true
				break
			}
		}
		lt.kvCode[s] = v
	}
	return v
}

func isCacheFile(file string) bool {
	for _, f := range cacheFiles {
		if strings.HasSuffix(file, f) {
			return true
		}
	}
	return false
}

// inference adds the inference categories a device holds to lt's order.
// A cache's code allocating is kv_cache only in a run without backward or
// optimizer steps: a training forward that fills a cache (transformers'
// use_cache) saves those keys and values for backward, as activations.
func (lt *lifetimes) inference(named, frames bool, pools []addrRange) {
	lt.kvFrames = frames && !lt.frameless.any() && len(lt.opt) == 0
	lt.hasKV, lt.pools, lt.kvCode = named || lt.kvFrames, pools, map[profiler.StackID]bool{}
	lt.order = withInference(lt.order, lt.hasKV, len(pools) > 0)
}

// pooledEntries are the level-log entries of the tracked blocks in private
// pools (alive at the end or at the peak), with their addresses: the
// timeline's replay knows no addresses. CUDA graphs keep their pools'
// blocks, so those are nearly all of them.
func (lt *lifetimes) pooledEntries(t *tracker) map[int32]uint64 {
	if len(lt.pools) == 0 {
		return nil
	}
	out := map[int32]uint64{}
	add := func(b block) {
		if b.li >= 0 && inRanges(lt.pools, b.addr) {
			out[b.li] = b.addr
		}
	}
	for _, b := range t.live {
		add(b)
	}
	for _, b := range t.freedSincePeak {
		add(b)
	}
	return out
}

// inferenceCategory is kv_cache or graph_pool for a traced block that is
// one of them, else "".
func (lt *lifetimes) inferenceCategory(b block) string {
	if len(lt.pools) > 0 && inRanges(lt.pools, b.addr) {
		return CatGraphPool
	}
	if lt.kvFrames && b.seq >= 0 && lt.isKVCache(lt.stackOf(b)) {
		return CatKVCache
	}
	return ""
}

// withInference appends the inference categories a device holds to a
// category order: kv_cache where the walk named a cache or a stack
// allocates in one, graph_pool where the device has private pools.
func withInference(order []string, kv, pools bool) []string {
	out := order[:len(order):len(order)]
	if kv {
		out = append(out, CatKVCache)
	}
	if pools {
		out = append(out, CatGraphPool)
	}
	return out
}

// namedKV reports whether the agent named a KV cache on dev.
func (a *analysis) namedKV(dev int) bool {
	if a.names != nil {
		for _, e := range a.names.walk.Entries {
			if e.Kind == "kv_cache" && e.Device == dev {
				return true
			}
		}
	}
	return false
}

// cacheFrames reports whether a recorded frame is in a KV cache's code.
func (a *analysis) cacheFrames() bool {
	for i := 0; i < a.frames.NumFrames(); i++ {
		if isCacheFile(a.frames.FrameAt(profiler.FrameID(i)).File) {
			return true
		}
	}
	return false
}
