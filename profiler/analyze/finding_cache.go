package analyze

import (
	"fmt"
	"sort"
)

// cacheGrowth reports a site that kept allocating new blocks of different
// sizes that are never freed, and then stopped: a cache keyed by shape or
// length. Its blocks still live at the end come from at least three steps in
// at least three sizes, and none from the last quarter of the steps (at least
// three steps): the growth flattened. A site that never stops is a leak.
// Severity is info below a tenth of the peak, warning above.
func (dg *devDiag) cacheGrowth(leakSites map[string]bool) []Finding {
	steps := dg.d.Steps
	n := len(steps)
	quiet := max(3, (n+3)/4)
	if n < quiet+3 {
		return nil
	}
	var out []Finding
	for _, s := range dg.survivors() {
		if leakSites[s.key()] || len(s.sizes) < 3 {
			continue
		}
		var in []int
		for st := range s.steps {
			if st < n {
				in = append(in, st)
			}
		}
		sort.Ints(in)
		if len(in) < 3 || in[len(in)-1] > n-1-quiet || s.steps[n] > 0 {
			continue
		}
		last := in[len(in)-1]
		file, line, fn := s.file, s.line, s.fn
		peak := dg.d.Peak.Bytes
		sev := "info"
		if 10*s.bytes >= peak {
			sev = "warning"
		}
		out = append(out, Finding{Kind: KindCacheGrowth, Severity: sev, File: file, Line: line,
			Title: fmt.Sprintf("Cache growth: %s kept %d blocks of %d sizes (%s, %d%% of the peak), new ones until step %d, none in the %d steps since",
				dg.short(file, line), s.blocks, len(s.sizes), fb(s.bytes), pct(s.bytes, peak), last, n-1-last),
			Evidence: Evidence{Numbers: map[string]int64{"bytes": s.bytes, "blocks": s.blocks, "sizes": int64(len(s.sizes)),
				"steps_with_new_blocks": int64(len(in)), "last_new_step": int64(last), "steps": int64(n), "peak_share_pct": pct(s.bytes, peak)},
				Lines:   []EvidenceLine{{File: file, Line: line, Bytes: s.bytes, Note: fmt.Sprintf("%s: blocks never freed, one per new shape", fn)}},
				StartUS: s.first, EndUS: s.last},
			Fix: "a cache keyed by shape or length: bound it (evict entries, functools.lru_cache(maxsize=...)), pad the keys " +
				"to a few sizes so fewer entries exist, or build one table for the largest size and slice it"})
	}
	return out
}
