package analyze_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
	snapsynth "github.com/vramscope/vramscope/internal/synth"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// synthetic writes a snapshot of n trace entries repeating gpt2_train's steps,
// every repetition annotated, and analyses it.
func synthetic(t *testing.T, n int64, before bool) (*analyze.Result, *snapsynth.Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "long.pickle")
	g, err := snapsynth.GenerateFile(path, filepath.Join(fixtureDir, "gpt2_train.pickle"),
		snapsynth.Options{Entries: n, MaxAnnotatedReps: 1 << 20, AnnotationsBeforeTrace: before})
	if err != nil {
		reftool.Missing(t, "gpt2_train fixture: %v", err)
	}
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r, g
}

// A trace of 2.5M entries (1.7M allocations and frees, beyond the 1,048,576
// the engine once stopped at) is analysed whole: every timeline point is
// split by category and the split adds up to its level, and the steps run
// from the trace's beginning to its last annotated optimizer step.
func TestWholeTraceSynthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 2.5M-entry snapshot")
	}
	r, g := synthetic(t, 2_500_000, false)
	d := r.Devices[0]
	if d.StepsIncomplete || r.Events != g.Entries {
		t.Fatalf("incomplete %v, %d events of %d", d.StepsIncomplete, r.Events, g.Entries)
	}
	if allocs := g.Actions["alloc"] + g.Actions["free_completed"]; allocs <= 1<<20 {
		t.Fatalf("only %d allocations and frees: not beyond the old cap", allocs)
	}
	for i, p := range d.Timeline.Points {
		var sum int64
		for _, c := range p.Categories {
			sum += c
		}
		if len(p.Categories) == 0 || sum != p.Allocated {
			t.Fatalf("point %d at %d of [%d, %d]: categories %v add up to %d, allocated %d",
				i, p.TimeUS, d.StartUS, d.EndUS, p.Categories, sum, p.Allocated)
		}
	}
	var ends []int64
	for _, m := range d.Timeline.Markers {
		if strings.HasPrefix(m.Name, "Optimizer.step#") && m.Kind == "end" && m.TimeUS >= d.StartUS {
			ends = append(ends, m.TimeUS)
		}
	}
	if len(d.Steps) != len(ends) || len(ends) < 200 {
		t.Fatalf("%d steps, %d optimizer steps annotated in the trace", len(d.Steps), len(ends))
	}
	if last := d.Steps[len(d.Steps)-1]; last.EndUS != ends[len(ends)-1] {
		t.Errorf("last step ends at %d, the last optimizer step at %d", last.EndUS, ends[len(ends)-1])
	}
	validSteps(t, d)
}

// validSteps checks that every step lies inside the trace, in order, and that
// the steps' peaks are the trace's: none above it, and the step holding the
// trace's peak reaches it.
func validSteps(t *testing.T, d analyze.Device) {
	t.Helper()
	for i, s := range d.Steps {
		if s.StartUS > s.EndUS || s.StartUS < d.StartUS || (i > 0 && s.StartUS != d.Steps[i-1].EndUS) {
			t.Fatalf("step %d: [%d, %d] in a trace [%d, %d]", i, s.StartUS, s.EndUS, d.StartUS, d.EndUS)
		}
		if s.PeakBytes > d.Peak.Bytes || s.PeakBytes < max(s.LiveBytesAtStart, s.LiveBytesAtEnd) {
			t.Fatalf("step %d: peak %d, trace's peak %d, levels %d..%d", i, s.PeakBytes, d.Peak.Bytes,
				s.LiveBytesAtStart, s.LiveBytesAtEnd)
		}
		if d.Peak.TimeUS > s.StartUS && d.Peak.TimeUS <= s.EndUS && s.PeakBytes != d.Peak.Bytes {
			t.Fatalf("step %d holds the trace's peak (%d) but reports %d", i, d.Peak.Bytes, s.PeakBytes)
		}
	}
}

// When the annotations reach further back than the trace (PyTorch keeps them
// in their own ring), the optimizer steps that ended before the trace's first
// event are counted apart, not turned into steps with made-up levels.
func TestStepsBeforeTrace(t *testing.T) {
	r, _ := synthetic(t, 200_000, true)
	d := r.Devices[0]
	if d.StepsBeforeTrace == 0 || r.StepsBeforeTrace != d.StepsBeforeTrace {
		t.Fatalf("steps before the trace: device %d, result %d", d.StepsBeforeTrace, r.StepsBeforeTrace)
	}
	validSteps(t, d)
	var ends int
	for _, m := range d.Timeline.Markers {
		if strings.HasPrefix(m.Name, "Optimizer.step#") && m.Kind == "end" {
			ends++
		}
	}
	if len(d.Steps)+d.StepsBeforeTrace != ends {
		t.Errorf("%d steps + %d before the trace, %d optimizer steps annotated", len(d.Steps), d.StepsBeforeTrace, ends)
	}
}

// The repository's snapshots with steps hold valid ones too.
func TestStepsValidOnRecordings(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			for _, d := range result(t, in.name).Devices {
				validSteps(t, d)
			}
		})
	}
}

// A run recorded over 3 hours (the level log's uint32 microseconds once
// stopped at 71 minutes): every step is found, with the peak the trace
// reached in it, and every timeline point is split by category.
func TestTraceOfHours(t *testing.T) {
	r, f := synth(t, "hours")
	checkDevicesAgainstReplay(t, r, f)
	d := r.Devices[0]
	if span := d.EndUS - d.StartUS; span < 3*3600e6-900e6 || len(d.Steps) != 12 || d.StepsIncomplete {
		t.Fatalf("span %d µs, %d steps (incomplete %v)", span, len(d.Steps), d.StepsIncomplete)
	}
	for k, s := range d.Steps {
		if want := int64(16+k+8) << 20; s.PeakBytes != want {
			t.Errorf("step %d at %.0f min: peak %d, want %d", k, float64(s.EndUS-d.StartUS)/60e6, s.PeakBytes, want)
		}
	}
	validSteps(t, d)
	for i, p := range d.Timeline.Points {
		if len(p.Categories) == 0 {
			t.Fatalf("point %d (%.0f min) not split by category", i, float64(p.TimeUS-d.StartUS)/60e6)
		}
	}
}
