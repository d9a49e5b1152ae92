// Package forecast projects, from a training run's per-step memory levels,
// when its device (or its memory-fraction cap) will be full. Standard
// library only, like the rest of profiler/.
//
// The trend is read from the per-window maxima of the step peaks, never from
// single steps: a window spans several gradient-accumulation cycles and many
// batch lengths, so saw-tooth and variable-length batches only add noise to
// the maxima, and Theil–Sen's median of pairwise slopes ignores the odd eval
// pass. A projection is made only for growth that is sustained: the first
// steps (warm-up: optimizer state, caches that fill) are left out, the
// maxima must rise consistently (Kendall's tau), every third of the span
// must rise at a good share of the whole span's rate (a step jump, or a
// growth that stopped, fails this), and the rise must stand well above the
// noise. Several spans, shortest first, are tried, so a growth that began
// late in a long run is seen. docs/oom-warning.md has the measurements that
// set the thresholds.
package forecast

// Level is one step's memory, as the agent records it at the step's end.
type Level struct {
	Step      int     // the step's number, increasing
	TimeS     float64 // seconds on the process's clock at the step's end (0: unknown)
	Allocated int64   // torch.cuda.memory_allocated at the step's end
	Reserved  int64   // torch.cuda.memory_reserved at the step's end
	Peak      int64   // torch.cuda.max_memory_allocated over the step
}

// peak is the step's peak, or its allocated bytes when no peak was recorded.
func (l Level) peak() int64 { return max(l.Peak, l.Allocated) }

// Projection is when the step peaks' trend reaches the capacity (less the
// allocator's cache beyond the peak, Evidence.CacheGap), with the evidence
// for the trend. Growing is false, and Why says why, when there is
// no sustained growth to project.
type Projection struct {
	Growing        bool
	Why            string  // why there is no projection, when Growing is false
	Capacity       int64   // bytes the process may use: the device's, or its memory-fraction cap
	Level          int64   // the trend's level at the last step (bytes)
	LastStep       int     // the last step seen
	LastTimeS      float64 // its time
	Step           int     // the projected step at which the peak reaches Capacity
	TimeS          float64 // the projected time of that step (0: the levels carry no times)
	StepsLeft      int     // Step - LastStep
	SecondsLeft    float64 // TimeS - LastTimeS (0: unknown)
	BytesPerStep   float64 // the trend's slope
	BytesPerSecond float64 // the slope over the span's mean step duration (0: unknown)
	Evidence       Evidence
}

// Evidence is what the projection rests on.
type Evidence struct {
	Series           string     // the series the growth was found in: "step peak" or "memory allocated at step end"
	FromStep, ToStep int        // the span whose window maxima were fitted
	Windows          int        // how many windows
	WindowSteps      int        // steps per window
	Consistency      float64    // Kendall's tau of the window maxima against the step, -1 to 1
	ThirdSlopes      [3]float64 // Theil–Sen slope (bytes/step) of each third of the span, oldest first
	Rise             int64      // the trend's rise over the span (bytes)
	Noise            int64      // the maxima's robust spread around the trend (bytes)
	CacheGap         int64      // reserved beyond the step peak lately: the peak is projected to Capacity - CacheGap
}
