package analyze

import "github.com/vramscope/vramscope/profiler"

// MaxTimelinePoints bounds the timeline whatever the trace length.
const MaxTimelinePoints = 2000

// Point is one bucket of the timeline: the highest allocated and reserved bytes
// seen in it, so downsampling never hides the peak, and the lowest allocated,
// so a level that swings inside a bucket (steps, zoomed out) shows as a band.
type Point struct {
	TimeUS    int64 `json:"time_us"`
	Allocated int64 `json:"allocated"`
	Reserved  int64 `json:"reserved"`
	Low       int64 `json:"low_allocated"`
	// Categories splits Allocated by Timeline.CategoryNames, at the moment
	// the point's allocated level was reached; absent past a truncated log.
	Categories []int64 `json:"categories,omitempty"`
}

// Marker is an annotation boundary or a training step on the timeline.
type Marker struct {
	TimeUS int64  `json:"time_us"`
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "start", "end" or "step"
}

// Timeline is memory over time for one device.
type Timeline struct {
	Device  int      `json:"device"`
	Points  []Point  `json:"points"`
	Markers []Marker `json:"markers"`
	// CategoryNames name the entries of each point's Categories.
	CategoryNames []string `json:"category_names,omitempty"`
}

// timeline downsamples on the fly: buckets of a width that doubles (merging
// neighbours) whenever there would be more than twice the points wanted.
type timeline struct {
	t0, width int64
	buckets   []Point // relative bytes; baselines are added at the end
	started   bool
	lastA     int64
	lastR     int64
}

func newTimeline() *timeline { return &timeline{width: 1} }

func (tl *timeline) add(t, cur, rcur int64) {
	if !tl.started {
		tl.t0, tl.started = t, true
	}
	u := bucketOf(t, tl.t0, tl.width)
	for u >= 2*MaxTimelinePoints {
		tl.halve()
		u = bucketOf(t, tl.t0, tl.width)
	}
	i := int(u)
	// Buckets skipped over hold the level that lasted through them.
	for len(tl.buckets) <= i {
		tl.buckets = append(tl.buckets, Point{TimeUS: bucketStart(tl.t0, int64(len(tl.buckets)), tl.width), Allocated: tl.lastA, Reserved: tl.lastR, Low: tl.lastA})
	}
	b := &tl.buckets[i]
	b.Allocated = max(b.Allocated, cur)
	b.Low = min(b.Low, cur)
	b.Reserved = max(b.Reserved, rcur)
	tl.lastA, tl.lastR = cur, rcur
}

// bucketOf is the bucket of width microseconds from t0 that holds t; a t
// before t0 (clocks of different threads can step back a little) is in the
// first. The difference is taken in uint64: t - t0 of two int64 times can
// exceed the int64 range (-2^63 and 2^62 made a negative index), never the
// uint64 one.
func bucketOf(t, t0, width int64) uint64 {
	if t <= t0 {
		return 0
	}
	return (uint64(t) - uint64(t0)) / uint64(width)
}

// bucketStart is t0 + i*width, which lies between t0 and a time already
// seen, computed without an intermediate overflow.
func bucketStart(t0, i, width int64) int64 {
	return int64(uint64(t0) + uint64(i)*uint64(width))
}

func (tl *timeline) halve() {
	n := (len(tl.buckets) + 1) / 2
	for i := 0; i < n; i++ {
		a := tl.buckets[2*i]
		if 2*i+1 < len(tl.buckets) {
			b := tl.buckets[2*i+1]
			a.Allocated = max(a.Allocated, b.Allocated)
			a.Reserved = max(a.Reserved, b.Reserved)
			a.Low = min(a.Low, b.Low)
		}
		tl.buckets[i] = a
	}
	tl.buckets = tl.buckets[:n]
	tl.width *= 2
}

// result adds the baselines and attaches markers.
func (tl *timeline) result(device int, base, rbase int64, anns []profiler.Annotation) Timeline {
	for len(tl.buckets) > MaxTimelinePoints {
		tl.halve()
	}
	out := Timeline{Device: device, Points: make([]Point, len(tl.buckets)), Markers: []Marker{}}
	for i, b := range tl.buckets {
		out.Points[i] = Point{TimeUS: b.TimeUS, Allocated: b.Allocated + base, Reserved: b.Reserved + rbase, Low: b.Low + base}
	}
	for _, a := range anns {
		if a.Device != device {
			continue
		}
		kind := "end"
		if a.Start {
			kind = "start"
			if isStepMarker(a.Name) {
				kind = "step"
			}
		}
		out.Markers = append(out.Markers, Marker{TimeUS: a.TimeUS, Name: a.Name, Kind: kind})
	}
	return out
}

// isStepMarker recognises PyTorch's own optimizer-step annotation.
func isStepMarker(name string) bool {
	return len(name) >= 15 && name[:15] == "Optimizer.step#"
}
