package analyze_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// checkTimeline: bounded, time-ordered, inside the trace's span, and
// downsampling keeps the maximum, so the highest point is the device's peak.
func checkTimeline(t *testing.T, d analyze.Device) {
	t.Helper()
	tl := d.Timeline
	if tl.Device != d.Device {
		t.Errorf("timeline of device %d labelled %d", d.Device, tl.Device)
	}
	if n := len(tl.Points); n == 0 || n > analyze.MaxTimelinePoints {
		t.Fatalf("device %d: %d timeline points, want 1..%d", d.Device, n, analyze.MaxTimelinePoints)
	}
	var maxA int64
	bad := 0
	for i, p := range tl.Points {
		if bad > 5 {
			t.Fatalf("device %d: more bad points", d.Device)
		}
		if i > 0 && p.TimeUS <= tl.Points[i-1].TimeUS {
			t.Fatalf("device %d: point %d at %d µs not after point %d at %d µs", d.Device, i, p.TimeUS, i-1, tl.Points[i-1].TimeUS)
		}
		if p.TimeUS < d.StartUS || p.TimeUS > d.EndUS {
			bad++
			t.Errorf("device %d: point %d at %d µs outside the trace [%d, %d]", d.Device, i, p.TimeUS, d.StartUS, d.EndUS)
		}
		if p.Allocated < 0 || p.Reserved < p.Allocated {
			bad++
			t.Errorf("device %d: point %d: allocated %d, reserved %d", d.Device, i, p.Allocated, p.Reserved)
		}
		if p.Low < 0 || p.Low > p.Allocated {
			bad++
			t.Errorf("device %d: point %d: lowest %d, highest %d", d.Device, i, p.Low, p.Allocated)
		}
		maxA = max(maxA, p.Allocated)
	}
	if maxA != d.Peak.Bytes {
		t.Errorf("device %d: highest timeline point %d, peak %d", d.Device, maxA, d.Peak.Bytes)
	}
	for i, m := range tl.Markers {
		if i > 0 && m.TimeUS < tl.Markers[i-1].TimeUS {
			t.Errorf("device %d: marker %d out of time order", d.Device, i)
		}
		switch m.Kind {
		case "start", "end", "step":
		default:
			t.Errorf("device %d: marker kind %q", d.Device, m.Kind)
		}
	}
}

func TestTimeline(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			for _, d := range r.Devices {
				checkTimeline(t, d)
			}
			// The reserved line is anchored at the segments the snapshot holds and
			// moved by segment events: its maximum is PyTorch's max_reserved.
			sc := readSidecar(t, in.name)
			var maxR int64
			for _, p := range r.Devices[0].Timeline.Points {
				maxR = max(maxR, p.Reserved)
			}
			if want := f.Devices[0].MaxReserved; maxR != want {
				t.Errorf("highest reserved point %d, replay of segment events %d", maxR, want)
			}
			if sc.MaxReserved != 0 && maxR != sc.MaxReserved {
				t.Errorf("highest reserved point %d, PyTorch measured max_reserved %d", maxR, sc.MaxReserved)
			}
		})
	}
}

// Every optimizer step (PyTorch's own Optimizer.step#... annotation) is a
// "step" marker: as many as the run recorded steps.
func TestTimelineStepMarkers(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			steps := 0
			for _, d := range r.Devices {
				for _, m := range d.Timeline.Markers {
					if m.Kind == "step" {
						steps++
						if !strings.HasPrefix(m.Name, "Optimizer.step#") {
							t.Errorf("step marker named %q", m.Name)
						}
					}
				}
			}
			if steps != f.StepMarkers {
				t.Errorf("%d step markers, the snapshot has %d Optimizer.step# starts", steps, f.StepMarkers)
			}
			sc := readSidecar(t, in.name)
			want := len(sc.StepTimes)
			if want == 0 {
				want = sc.Steps
			}
			// An inference loop's sidecar counts iterations; it has no optimizer.
			if want > 0 && f.StepMarkers > 0 && steps != want {
				t.Errorf("%d step markers, the run took %d optimizer steps", steps, want)
			}
		})
	}
	r := result(t, "gpt2_train")
	found := false
	for _, m := range r.Devices[0].Timeline.Markers {
		if m.Kind == "step" && m.Name == "Optimizer.step#AdamW.step" {
			found = true
		}
	}
	if !found {
		t.Error("gpt2_train: no step marker for Optimizer.step#AdamW.step")
	}
}

// Arrays in the JSON are arrays, also when empty: front ends iterate them
// without null checks. cuda_graph has no annotations at all.
func TestJSONArraysAreNeverNull(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			b, err := json.Marshal(result(t, in.name))
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"devices", "sites", "leaf_sites", "top_stacks", "ooms", "findings"} {
				if _, ok := v[k].([]any); !ok {
					t.Errorf("%q is %v, not an array", k, v[k])
				}
			}
			for i, d := range v["devices"].([]any) {
				tl := d.(map[string]any)["timeline"].(map[string]any)
				for _, k := range []string{"points", "markers"} {
					if _, ok := tl[k].([]any); !ok {
						t.Errorf("devices[%d].timeline.%s is %v, not an array", i, k, tl[k])
					}
				}
			}
		})
	}
}

// Every timeline point splits its allocated bytes by category, and the split
// at the peak's point is the peak's own split.
func TestTimelineCategories(t *testing.T) {
	for _, in := range inputs(t) {
		r, err := analyze.Run(in.path, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Devices {
			tl := d.Timeline
			if len(tl.Points) == 0 {
				continue
			}
			if len(tl.CategoryNames) != len(d.Categories) {
				t.Errorf("%s: category names %v", in.name, tl.CategoryNames)
				continue
			}
			with, off := 0, 0
			var peakPt *analyze.Point
			for i, p := range tl.Points {
				if p.Categories == nil {
					continue
				}
				with++
				var sum int64
				for _, c := range p.Categories {
					sum += c
					if c < 0 {
						t.Errorf("%s: point %d has a negative category: %v", in.name, i, p.Categories)
					}
				}
				if sum != p.Allocated {
					off++
				}
				if p.Allocated == d.Peak.Bytes && peakPt == nil {
					peakPt = &tl.Points[i]
				}
			}
			if with < len(tl.Points)*99/100 || off > len(tl.Points)/100 {
				t.Errorf("%s device %d: %d of %d points split, %d do not add up to their allocated bytes",
					in.name, d.Device, with, len(tl.Points), off)
			}
			if peakPt == nil {
				t.Errorf("%s: no point at the peak %d", in.name, d.Peak.Bytes)
				continue
			}
			var diff int64
			for i, c := range d.Categories {
				diff += abs64(peakPt.Categories[i] - c.Bytes)
			}
			if float64(diff) > 0.01*float64(d.Peak.Bytes) {
				t.Errorf("%s: the peak's point splits as %v, the peak as %+v", in.name, peakPt.Categories, d.Categories)
			}
		}
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
