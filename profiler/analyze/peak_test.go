package analyze_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// The peak agrees with what PyTorch itself measured during the run
// (torch.cuda.max_memory_allocated in the sidecar). The trace records requested
// sizes while the allocator counts rounded blocks, so the two differ by the
// rounding: well under 1%.
func TestPeakMatchesSidecar(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			sc := readSidecar(t, in.name)
			if sc.MaxAllocated == 0 {
				t.Skip("the sidecar does not record max_allocated")
			}
			rel := math.Abs(float64(r.Peak.Bytes-sc.MaxAllocated)) / float64(sc.MaxAllocated)
			if rel > 0.01 {
				t.Errorf("peak %d, PyTorch measured max_allocated %d (%.2f%% off)", r.Peak.Bytes, sc.MaxAllocated, 100*rel)
			}
			if r.Peak.Bytes > sc.MaxAllocated {
				t.Errorf("peak %d exceeds PyTorch's max_allocated %d: requested sizes never exceed block sizes", r.Peak.Bytes, sc.MaxAllocated)
			}
		})
	}
}

// The peak is exactly what a naive Python replay of the same file gives, and
// is reached at the same event.
func TestPeakMatchesPythonReplay(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			checkDevicesAgainstReplay(t, r, f)
		})
	}
}

func checkDevicesAgainstReplay(t *testing.T, r *analyze.Result, f *pyFacts) {
	t.Helper()
	if len(r.Devices) != len(f.Devices) {
		t.Fatalf("%d devices, the replay has %d", len(r.Devices), len(f.Devices))
	}
	var maxPeak int64
	for _, pf := range f.Devices {
		d := deviceOf(t, r, pf.Device)
		if d.Peak.Bytes != pf.Peak {
			t.Errorf("device %d: peak %d, Python replay %d (diff %d)", pf.Device, d.Peak.Bytes, pf.Peak, d.Peak.Bytes-pf.Peak)
		}
		if d.Peak.Seq != pf.PeakEvent {
			t.Errorf("device %d: peak at event %d, Python replay at %d", pf.Device, d.Peak.Seq, pf.PeakEvent)
		}
		if pf.PeakTimeUS != nil && d.Peak.TimeUS != *pf.PeakTimeUS {
			t.Errorf("device %d: peak at %d µs, Python replay at %d µs", pf.Device, d.Peak.TimeUS, *pf.PeakTimeUS)
		}
		if d.PreTraceBytes != pf.PreTraceBytes {
			t.Errorf("device %d: pre_trace_bytes %d, Python replay %d", pf.Device, d.PreTraceBytes, pf.PreTraceBytes)
		}
		if d.Events != pf.Events {
			t.Errorf("device %d: %d events, the trace holds %d", pf.Device, d.Events, pf.Events)
		}
		maxPeak = max(maxPeak, pf.Peak)
	}
	if r.Peak.Bytes != maxPeak {
		t.Errorf("result peak %d, highest device peak %d", r.Peak.Bytes, maxPeak)
	}
	if r.Events != f.Events {
		t.Errorf("%d events, the traces hold %d", r.Events, f.Events)
	}
}

// When the ring buffer has wrapped, the trace starts mid-run: blocks are freed
// that it never saw allocated, and blocks alive at the end were allocated
// before it. The replay must still match, and the peak inside the window can
// only be what the full trace saw in that window (up to block rounding).
func TestPeakRingWrapped(t *testing.T) {
	full := result(t, "gpt2_train")
	fullFacts := facts(t, "gpt2_train")
	// Drop the first 2500 events: the window starts inside step 0's forward
	// pass, before the peak at event 2950.
	const drop = 2500
	path := filepath.Join(t.TempDir(), "wrapped.pickle")
	snaptool(t, "wrap", pathOf(t, "gpt2_train"), "2500", path)
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := factsOf(t, path)
	if f.Devices[0].PreFreed == 0 {
		t.Fatal("the wrapped trace frees nothing it did not allocate: the test lost its point")
	}
	checkDevicesAgainstReplay(t, r, f)
	if want := fullFacts.Devices[0].PeakEvent - drop; r.Peak.Seq != want {
		t.Errorf("wrapped peak at event %d, want %d (the full trace's %d less %d)", r.Peak.Seq, want, full.Peak.Seq, drop)
	}
	if rel := math.Abs(float64(r.Peak.Bytes-full.Peak.Bytes)) / float64(full.Peak.Bytes); rel > 0.005 {
		t.Errorf("wrapped peak %d, full trace %d (%.2f%% off)", r.Peak.Bytes, full.Peak.Bytes, 100*rel)
	}
	checkSums(t, r)
}
