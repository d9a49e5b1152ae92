package analyze

import (
	"fmt"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// TestGroupNames: the layers of a module stack and the entries of a list or
// a dict, whatever their keys, read as one name.
func TestGroupNames(t *testing.T) {
	for in, want := range map[string]string{
		"model.transformer.h.3.mlp.c_fc.weight":      "model.transformer.h.*.mlp.c_fc.weight",
		"kept[17] in main (kept_growth.py:17)":       "kept[*] in main (kept_growth.py:17)",
		"maskcache._CACHE[(16, 512, 4821)]":          "maskcache._CACHE[*]",
		"kvserver.SERVER.sessions['s3'][11].k":       "kvserver.SERVER.sessions[*][*].k",
		"d['a]'][\"b[\"]":                            "d[*][*]",
		"fn.<lru_cache>[((1, 2), 'x')]":              "fn.<lru_cache>[*]",
		"past_key_values.layers[0].keys in generate": "past_key_values.layers[*].keys in generate",
		"unclosed[(1, 2]":                            "unclosed[(1, 2]",
		"saved by MulBackward0 in model.h.0.mlp":     "saved by MulBackward0 in model.h.*.mlp",
	} {
		if got := groupName(in); got != want {
			t.Errorf("groupName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHolderGrows: which groups are caches that grow, from the walk's own
// entries: many tensors of one rank held directly by a container (or per
// key and entry), kept by a global, an attribute or a local.
func TestHolderGrows(t *testing.T) {
	entries := func(kind, name string, n int, shape func(i int) []int64) []profiler.NamedTensor {
		var out []profiler.NamedTensor
		for i := range n {
			out = append(out, profiler.NamedTensor{Addr: uint64(0x1000 * (i + 1)), Kind: kind, Name: name, Shape: shape(i)})
		}
		return out
	}
	byLen := func(i int) []int64 { return []int64{16, 512 + int64(i), 4096} }
	same := func(int) []int64 { return []int64{4, 256, 50257} }
	for _, c := range []struct {
		what    string
		entries []profiler.NamedTensor
		grows   bool
	}{
		{"a global dict keyed by length", entries("global", "maskcache._CACHE[(16, %d)]", 40, byLen), true},
		{"a kept list of logits", entries("local", "kept[%d] in main (train.py:17)", 59, same), true},
		{"sessions of per-layer objects", entries("global", "SERVER.sessions['s%d'][3].k", 30, same), true},
		{"too few entries", entries("global", "maskcache._CACHE[(16, %d)]", 7, byLen), false},
		{"a model's per-layer tensors", entries("attribute", "model.cache.layers[%d].k", 32, same), false},
		{"a key/value cache", entries("kv_cache", "past.layers[%d].keys", 64, same), false},
		{"shapes of several ranks", entries("global", "misc[%d]", 40, func(i int) []int64 { return make([]int64, 1+i%2) }), false},
		{"an older agent's entries, no shapes", entries("global", "maskcache._CACHE[%d]", 40, func(int) []int64 { return nil }), false},
	} {
		x := newTensorIndex(&profiler.TensorNames{Entries: c.entries})
		var k groupKey
		for i := range c.entries {
			e := &c.entries[i]
			e.Name = fmtIndex(e.Name, i)
			k = x.key(e)
			x.count(e, 1<<20)
		}
		if len(x.groups) != 1 {
			t.Fatalf("%s: %d groups", c.what, len(x.groups))
		}
		if got := x.holderGrows(k, x.groups[k]); got != c.grows {
			t.Errorf("%s (%s): grows %v, want %v", c.what, k.name, got, c.grows)
		}
	}
}

func fmtIndex(format string, i int) string {
	return fmt.Sprintf(format, i)
}
