package analyze

import (
	"strings"
	"testing"
)

// TestSiteIndexAgreesWithSites: the stacks behind each user site add up to
// the site's own totals, and each stack passes through that line.
func TestSiteIndexAgreesWithSites(t *testing.T) {
	r, err := Run("../../../shared/fixtures/snapshots/gpt2_train.pickle", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ix := r.IndexSites()
	checked := 0
	for _, s := range r.Sites {
		if s.Kind != "user" {
			continue
		}
		stacks := ix.Stacks(s.File, s.Line, 0)
		var peak, alloc, n int64
		for i, st := range stacks {
			peak += st.PeakBytes
			alloc += st.AllocBytes
			n += st.Allocs
			if i > 0 && st.PeakBytes > stacks[i-1].PeakBytes {
				t.Errorf("%s:%d: stacks not sorted by peak bytes", s.File, s.Line)
			}
			through := false
			for _, f := range st.Frames {
				through = through || (f.File == s.File && f.Line == s.Line)
			}
			if !through && !strings.HasPrefix(st.Frames[len(st.Frames)-1].Func, "[") {
				t.Errorf("%s:%d: a stack does not pass through the line: %v", s.File, s.Line, st.Frames)
			}
		}
		if peak != s.PeakBytes || alloc != s.AllocBytes || n != s.Allocs {
			t.Errorf("%s:%d: stacks sum to peak %d alloc %d n %d; site says %d %d %d", s.File, s.Line, peak, alloc, n, s.PeakBytes, s.AllocBytes, s.Allocs)
		}
		if top := ix.Stacks(s.File, s.Line, 2); len(stacks) >= 2 && len(top) != 2 {
			t.Errorf("limit ignored: %d", len(top))
		}
		checked++
	}
	if checked < 3 {
		t.Fatalf("only %d user sites", checked)
	}
	if got := ix.Stacks("/nowhere.py", 1, 5); len(got) != 0 {
		t.Errorf("stacks for an unknown line: %v", got)
	}
}

// TestSiteCategoriesAddUp: a line's bytes at the peak, split by category,
// add up to the line's peak bytes; the forward line holds activations and
// the optimizer line optimizer state.
func TestSiteCategoriesAddUp(t *testing.T) {
	r, err := Run("../../../shared/fixtures/snapshots/gpt2_train.pickle", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Sites {
		if s.Kind != "user" {
			continue
		}
		var sum int64
		for _, c := range s.Categories.Named() {
			sum += c.Bytes
		}
		if sum != s.PeakBytes {
			t.Errorf("%s:%d: categories sum to %d, peak bytes %d (%+v)", s.File, s.Line, sum, s.PeakBytes, s.Categories)
		}
		want := map[int]string{22: CatActivation, 24: CatOptimizerState}[s.Line]
		if named := s.Categories.Named(); want != "" && (len(named) == 0 || named[0].Name != want) {
			t.Errorf("%s:%d: largest category %v, want %s", s.File, s.Line, named, want)
		}
	}
}
