package analyze

import "sort"

// SiteIndex finds the stacks behind one site (a source line) without walking
// every origin: the language server builds it once per snapshot and answers
// every hover from it.
type SiteIndex struct {
	r      *Result
	bySite map[SiteRef][]int32
}

// SiteRef names a site as Result.Sites does: the recorded file and line of
// the first user frame (or of the backward() call a pass belongs to).
type SiteRef struct {
	File string
	Line int
}

// IndexSites groups the result's origins by their user site.
func (r *Result) IndexSites() *SiteIndex {
	a := &analysis{frames: r.frames, origins: r.origins}
	ix := &SiteIndex{r: r, bySite: map[SiteRef][]int32{}}
	r.origins.each(func(id int32, _ *origin) {
		uk, _ := a.siteKeys(id)
		if uk.file == "" {
			return
		}
		k := SiteRef{uk.file, uk.line}
		ix.bySite[k] = append(ix.bySite[k], id)
	})
	return ix
}

// Stacks returns up to n stacks attributed to the site at file:line (recorded
// names), most bytes at the peak first, then most allocated; frames root
// first with nn.Module call wrappers folded.
func (ix *SiteIndex) Stacks(file string, line, n int) []Stack {
	ids := ix.bySite[SiteRef{file, line}]
	out := make([]Stack, 0, len(ids))
	for _, id := range ids {
		x := ix.r.origins.at(id)
		out = append(out, Stack{PeakBytes: x.peakBytes, CurrentBytes: x.currentBytes, AllocBytes: x.allocBytes, Allocs: x.allocs})
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := out[order[i]], out[order[j]]
		if a.PeakBytes != b.PeakBytes {
			return a.PeakBytes > b.PeakBytes
		}
		return a.AllocBytes > b.AllocBytes
	})
	if n > 0 && len(order) > n {
		order = order[:n]
	}
	res := make([]Stack, len(order))
	for i, k := range order {
		res[i] = out[k]
		res[i].Frames = ix.r.framePath(ids[k], true)
	}
	return res
}
