package analyze

import (
	"fmt"
	"sort"
)

// projectionSteps is how far ahead an unbounded cache's size is projected: a
// thousand more steps, an ordinary length for a fine-tuning run or an
// inference service's first minutes. It is an upper bound (the cache stops
// when every shape has been seen) and the title says so.
const projectionSteps = 1000

// unboundedCache reports a cache keyed by shape or length that is still
// adding entries when the snapshot ends: a line whose blocks live at the end
// come from at least three steps in at least three sizes, at most three
// blocks a size (one entry per key, and few shapes share a size; a list of
// kept outputs has one size), with new ones in the last max(3, N/4) steps (a
// cache that stopped is cacheGrowth's) and not on enough steps to be a leak
// (leakSites); memory between steps grew with it (levelGrew). It falls
// between the two: it grows on some steps, not all, and has not stopped.
func (dg *devDiag) unboundedCache(leakSites map[string]bool) []Finding {
	steps := dg.d.Steps
	n := len(steps)
	quiet := max(3, (n+3)/4)
	if n < quiet+3 {
		return nil
	}
	var out []Finding
	for _, s := range dg.survivors() {
		if leakSites[s.key()] || len(s.sizes) < 3 || 3*int64(len(s.sizes)) < s.blocks || s.file == "" {
			continue
		}
		var in []int
		for st := range s.steps {
			if st < n {
				in = append(in, st)
			}
		}
		sort.Ints(in)
		if len(in) < 3 || (in[len(in)-1] <= n-1-quiet && s.steps[n] == 0) || !dg.levelGrew(s, in[0]) {
			continue
		}
		out = append(out, dg.unboundedFinding(s, in))
	}
	return out
}

// levelGrew says whether memory between steps grew by at least half of what
// a site added after its first step: a bounded cache (an LRU) frees an entry
// for each one it adds, and its survivors are only the entries of the moment.
func (dg *devDiag) levelGrew(s *survivor, first int) bool {
	steps := dg.d.Steps
	var added int64
	for st, b := range s.steps {
		if st > first && st < len(steps) {
			added += b
		}
	}
	grown := steps[len(steps)-1].LiveBytesAtEnd - steps[first].LiveBytesAtEnd
	return added > 0 && 2*grown >= added
}

func (dg *devDiag) unboundedFinding(s *survivor, in []int) Finding {
	steps := dg.d.Steps
	n := len(steps)
	peak := dg.d.Peak.Bytes
	span := int64(n - in[0]) // steps since the first entry
	perStep := s.bytes / span
	nums := map[string]int64{"bytes": s.bytes, "blocks": s.blocks, "sizes": int64(len(s.sizes)),
		"steps_with_new_blocks": int64(len(in)), "first_new_step": int64(in[0]), "last_new_step": int64(in[len(in)-1]),
		"steps": int64(n), "peak_share_pct": pct(s.bytes, peak), "bytes_per_step": perStep,
		"projection_steps": projectionSteps, "projected_bytes": s.bytes + projectionSteps*perStep}
	fill := dg.fillText(nums, perStep, steps[n-1].PeakBytes, int64(n-1), "step")
	sev := "info"
	if 10*s.bytes >= peak || nums["fills_device_at_step"] > 0 {
		sev = "warning"
	}
	return Finding{Kind: KindUnboundedCache, Severity: sev, File: s.file, Line: s.line,
		Title: fmt.Sprintf("Unbounded cache: %s holds %d entries of %d sizes (%s, %d%% of the peak), new ones in %d of %d steps and still in step %d; "+
			"at %s per step it would hold up to %s after %d more steps%s",
			dg.short(s.file, s.line), s.blocks, len(s.sizes), fb(s.bytes), pct(s.bytes, peak), len(in), n, in[len(in)-1],
			fb(perStep), fb(nums["projected_bytes"]), projectionSteps, fill),
		Evidence: Evidence{Numbers: nums,
			Lines:   []EvidenceLine{{File: s.file, Line: s.line, Bytes: s.bytes, Note: fmt.Sprintf("%s: blocks never freed, one per new shape, still coming", s.fn)}},
			StartUS: s.first, EndUS: s.last},
		Fix: "a cache keyed by shape or length that has not stopped growing: bound it (evict entries, functools.lru_cache(maxsize=...)), " +
			"pad inputs to a few bucket sizes so the keys repeat, or pre-size one table for the largest shape and slice it"}
}
