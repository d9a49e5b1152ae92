package analyze_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// key identifies a site across snapshots. A phase is its window between user
// lines: the record_function scope in "[no user frame: scope]" is not part of it,
// since two runs of one script may annotate differently (gpt2_train is wrapped in
// train_step_N scopes, oom_batch is not).
func key(file string, line int, fn, kind string) string {
	if kind == "phase" && strings.HasPrefix(fn, "[no user frame: ") {
		if i := strings.Index(fn, "]"); i > 0 {
			fn = "[no user frame" + fn[i:]
		}
	}
	return fmt.Sprintf("%s\x00%d\x00%s\x00%s", file, line, fn, kind)
}

func TestCompareWithItself(t *testing.T) {
	for _, name := range []string{"gpt2_train", "leak_steps"} {
		t.Run(name, func(t *testing.T) {
			r := result(t, name)
			d := analyze.Compare(r, r)
			if d.PeakDelta != 0 || d.New != 0 || d.Gone != 0 || d.PeakA != r.Peak.Bytes || d.PeakB != r.Peak.Bytes {
				t.Errorf("self diff: %+v", d)
			}
			if len(d.Sites) != len(r.Sites) {
				t.Errorf("%d site deltas for %d sites", len(d.Sites), len(r.Sites))
			}
			for _, s := range d.Sites {
				if s.Status != "same" || s.PeakDelta != 0 || s.CurrentDelta != 0 || s.AllocDelta != 0 || s.AllocsDelta != 0 {
					t.Errorf("self diff site %+v", s)
				}
				if s.PeakBefore != s.PeakAfter {
					t.Errorf("self diff site %s: before %d after %d", s.Function, s.PeakBefore, s.PeakAfter)
				}
			}
		})
	}
}

// gpt2_train against llama_lora_gc: different scripts and models. New and
// gone sites are the set differences of the two results' site keys, and every
// delta is after minus before.
func TestCompareTwoRuns(t *testing.T) {
	a, b := result(t, "gpt2_train"), result(t, "llama_lora_gc")
	d := analyze.Compare(a, b)
	if d.Before != a.File || d.After != b.File {
		t.Errorf("before %q after %q", d.Before, d.After)
	}
	if d.PeakDelta != b.Peak.Bytes-a.Peak.Bytes || d.PeakA != a.Peak.Bytes || d.PeakB != b.Peak.Bytes {
		t.Errorf("peak %d -> %d delta %d; results say %d -> %d", d.PeakA, d.PeakB, d.PeakDelta, a.Peak.Bytes, b.Peak.Bytes)
	}
	before, after := map[string]analyze.Site{}, map[string]analyze.Site{}
	for _, s := range a.Sites {
		before[key(s.File, s.Line, s.Function, s.Kind)] = s
	}
	for _, s := range b.Sites {
		after[key(s.File, s.Line, s.Function, s.Kind)] = s
	}
	wantNew, wantGone, union := 0, 0, len(before)
	for k := range after {
		if _, ok := before[k]; !ok {
			wantNew++
			union++
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			wantGone++
		}
	}
	if d.New != wantNew || d.Gone != wantGone {
		t.Errorf("new %d gone %d; set differences give %d, %d", d.New, d.Gone, wantNew, wantGone)
	}
	if wantNew+wantGone == 0 {
		t.Error("the two runs have the same sites: the test lost its point")
	}
	if len(d.Sites) != union {
		t.Errorf("%d site deltas, %d distinct sites", len(d.Sites), union)
	}
	nonzero, unchangedPeak := 0, 0
	statuses := map[string]int{}
	for i, s := range d.Sites {
		k := key(s.File, s.Line, s.Function, s.Kind)
		x, y := before[k], after[k]
		statuses[s.Status]++
		if s.PeakBefore != x.PeakBytes || s.PeakAfter != y.PeakBytes || s.PeakDelta != y.PeakBytes-x.PeakBytes ||
			s.AllocDelta != y.AllocBytes-x.AllocBytes || s.AllocsDelta != y.Allocs-x.Allocs || s.CurrentDelta != y.CurrentBytes-x.CurrentBytes {
			t.Errorf("delta %+v disagrees with before %+v after %+v", s, x, y)
		}
		_, inA := before[k]
		_, inB := after[k]
		want := "changed"
		switch {
		case !inA:
			want = "new"
		case !inB:
			want = "gone"
		case s.PeakDelta == 0 && s.AllocDelta == 0 && s.AllocsDelta == 0 && s.CurrentDelta == 0:
			want = "same"
		}
		if s.Status != want {
			t.Errorf("site %s:%d %s: status %q, want %q", s.File, s.Line, s.Function, s.Status, want)
		}
		// Changed names exactly the measures that differ, and the label says them.
		var changed []string
		for _, m := range []struct {
			name string
			d    int64
		}{{"peak", s.PeakDelta}, {"current", s.CurrentDelta}, {"allocated", s.AllocDelta}, {"allocs", s.AllocsDelta}} {
			if m.d != 0 {
				changed = append(changed, m.name)
			}
		}
		if strings.Join(changed, ",") != strings.Join(s.Changed, ",") {
			t.Errorf("site %s:%d: changed %v, want %v", s.File, s.Line, s.Changed, changed)
		}
		if s.Status == "changed" && s.Label() != strings.Join(changed, ", ") || s.Status != "changed" && s.Label() != s.Status {
			t.Errorf("site %s:%d: label %q for status %q, changed %v", s.File, s.Line, s.Label(), s.Status, changed)
		}
		if s.Status == "changed" && s.PeakDelta == 0 {
			unchangedPeak++
		}
		if s.PeakDelta != 0 || s.AllocDelta != 0 {
			nonzero++
		}
		if i > 0 && abs(s.PeakDelta) > abs(d.Sites[i-1].PeakDelta) {
			t.Errorf("site deltas not ordered by |peak delta| at %d", i)
		}
	}
	if nonzero == 0 {
		t.Error("no site changed")
	}
	if statuses["new"] != d.New || statuses["gone"] != d.Gone {
		t.Errorf("statuses %v, new %d gone %d", statuses, d.New, d.Gone)
	}
	t.Logf("%d changed sites whose peak did not change", unchangedPeak)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// The same backward pass under a different record_function scope is one site:
// gpt2_train wraps steps in train_step_N, oom_batch does not.
func TestComparePhaseAcrossScopes(t *testing.T) {
	d := analyze.Compare(result(t, "gpt2_train"), result(t, "oom_batch"))
	for _, s := range d.Sites {
		if s.Kind == "phase" && strings.Contains(s.Function, "after train_gpt2.py:23") && s.Status != "changed" && s.Status != "same" {
			t.Errorf("backward phase %q is %s across the two runs", s.Function, s.Status)
		}
	}
	if d.New != 0 || d.Gone != 0 {
		t.Errorf("%d new, %d gone sites between two runs of the same training step", d.New, d.Gone)
	}
}
