package analyze_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler/analyze"
)

var held *analyze.Result

// TestFootprint: the estimate a cache weighs an analysis by is within a
// factor of two of the heap the analysis holds, for a snapshot of 100,000
// lines of its own and a real training snapshot.
func TestFootprint(t *testing.T) {
	real, err := os.ReadFile(filepath.Join(fixtureDir, "gpt2_train.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"many lines": hostile.ManyLines(100_000), "gpt2_train": real} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := analyze.FromBytes(name, b, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		held = r
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		est := r.Footprint()
		t.Logf("%s: estimate %d B, heap %d B", name, est, heap)
		if est < heap/2 || est > 2*heap+(2<<20) {
			t.Errorf("%s: estimate %d B, heap held %d B", name, est, heap)
		}
		held = nil
	}
}

// TestSummaryBounded: a snapshot of 20,000 lines of their own (a smaller
// cut of the 300,000-line attack: 111 MB of summary) has a summary with
// MaxSummarySites sites of each kind and a count of the rest, while the
// result keeps every site.
func TestSummaryBounded(t *testing.T) {
	r, err := analyze.FromBytes("many.pickle", hostile.ManyLines(20_000), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Sites         []analyze.Site `json:"sites"`
		LeafSites     []analyze.Site `json:"leaf_sites"`
		SitesMore     int            `json:"sites_more"`
		LeafSitesMore int            `json:"leaf_sites_more"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if len(r.Sites) != 20_000 || len(raw.Sites) != analyze.MaxSummarySites || raw.SitesMore != 20_000-analyze.MaxSummarySites ||
		len(raw.LeafSites) != analyze.MaxSummarySites || raw.LeafSitesMore != len(r.LeafSites)-analyze.MaxSummarySites {
		t.Errorf("result %d sites; summary %d + %d more, leaf %d + %d more", len(r.Sites), len(raw.Sites), raw.SitesMore, len(raw.LeafSites), raw.LeafSitesMore)
	}
	if raw.Sites[0] != r.Sites[0] {
		t.Errorf("the summary's first site %+v, the result's %+v", raw.Sites[0], r.Sites[0])
	}
	if len(b) > 1<<20 {
		t.Errorf("summary of %d bytes", len(b))
	}
}
