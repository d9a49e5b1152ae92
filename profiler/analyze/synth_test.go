package analyze_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// Two GPUs: device 0 holds memory allocated before recording and has an empty
// trace; device 1 does the work. Each device's peak, the result's peak (the
// higher one) and the sites (which cover both) must add up.
func TestTwoDevices(t *testing.T) {
	r, f := synth(t, "two_devices")
	checkDevicesAgainstReplay(t, r, f)
	if len(r.Devices) != 2 || r.Devices[0].Device != 0 || r.Devices[1].Device != 1 {
		t.Fatalf("devices %+v", r.Devices)
	}
	if r.Peak.Device != 1 {
		t.Errorf("peak on device %d, want 1", r.Peak.Device)
	}
	if d0 := r.Devices[0]; d0.Events != 0 || d0.Peak.Seq != -1 {
		t.Errorf("device 0 has no trace: events %d, peak event %d", d0.Events, d0.Peak.Seq)
	}
	for _, d := range r.Devices {
		if d.Events > 0 {
			checkTimeline(t, d)
		}
	}
	if r.Devices[1].Allocator.Reserved != f.Devices[1].Reserved || r.Devices[0].Allocator.Reserved != f.Devices[0].Reserved {
		t.Errorf("reserved per device %d, %d; segments say %d, %d", r.Devices[0].Allocator.Reserved,
			r.Devices[1].Allocator.Reserved, f.Devices[0].Reserved, f.Devices[1].Reserved)
	}
	steps := 0
	for _, m := range r.Devices[1].Timeline.Markers {
		if m.Kind == "step" {
			steps++
		}
	}
	if steps != 1 || len(r.Devices[0].Timeline.Markers) != 0 {
		t.Errorf("markers: device 0 %v, device 1 %v; the one step ran on device 1", r.Devices[0].Timeline.Markers, r.Devices[1].Timeline.Markers)
	}
	checkSums(t, r)
	// The frameless allocation between train.py:20 and :22 is a named phase.
	var phase bool
	for _, s := range r.Sites {
		if s.Kind == "phase" && strings.Contains(s.Function, "after train.py:20, before :22") {
			phase = true
			if s.PeakBytes != 4<<20 {
				t.Errorf("phase %q holds %d at the peak, want 4 MiB", s.Function, s.PeakBytes)
			}
		}
	}
	if !phase {
		t.Errorf("no phase after train.py:20: %v", phaseNames(r))
	}
}

// An alloc over an address the trace still holds (its free was never
// recorded). The block it replaces was live at the peak: the peak's bytes must
// still be attributed somewhere.
func TestAddressReuseKeepsPeakAttribution(t *testing.T) {
	r, f := synth(t, "address_reuse")
	checkDevicesAgainstReplay(t, r, f)
	checkSums(t, r)
}

// 100,000 events over a long span: the timeline stays within its bound and
// the one spike survives downsampling.
func TestLongTimeline(t *testing.T) {
	r, f := synth(t, "long")
	checkDevicesAgainstReplay(t, r, f)
	d := r.Devices[0]
	if len(d.Timeline.Points) < analyze.MaxTimelinePoints/2 {
		t.Errorf("only %d points for 100k events", len(d.Timeline.Points))
	}
	checkTimeline(t, d)
}

// FromBytes analyses the same bytes as Run reads from a file.
func TestFromBytesMatchesRun(t *testing.T) {
	path := pathOf(t, "example_train")
	need(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := analyze.FromBytes(filepath.Base(path), b, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, "example_train")
	if a.File != filepath.Base(path) || a.Bytes != r.Bytes || a.Events != r.Events || a.Peak != r.Peak {
		t.Errorf("FromBytes: file %q, %d bytes, %d events, peak %+v; Run: %d bytes, %d events, peak %+v",
			a.File, a.Bytes, a.Events, a.Peak, r.Bytes, r.Events, r.Peak)
	}
	if len(a.Sites) != len(r.Sites) {
		t.Fatalf("FromBytes: %d sites, Run %d", len(a.Sites), len(r.Sites))
	}
	for i := range a.Sites {
		if a.Sites[i] != r.Sites[i] {
			t.Errorf("site %d: FromBytes %+v, Run %+v", i, a.Sites[i], r.Sites[i])
		}
	}
	if _, err := analyze.FromBytes("x", b[:len(b)/2], analyze.Options{}); err == nil {
		t.Error("FromBytes of half a snapshot: no error")
	}
}

// Progress reports bytes read over both decoding passes, ending at the total.
func TestProgress(t *testing.T) {
	path := pathOf(t, "gpt2_train")
	need(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var last, total int64
	calls := 0
	_, err = analyze.Run(path, analyze.Options{Progress: func(done, tot int64) {
		if done < last {
			t.Errorf("progress went back from %d to %d", last, done)
		}
		last, total = done, tot
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || total != 2*st.Size() || last > total {
		t.Errorf("%d progress calls, last %d of %d; file is %d bytes", calls, last, total, st.Size())
	}
}
