package forecast

// series is one value of each level that a trend is fitted to.
type series struct {
	name  string
	value func(Level) int64
}

// The two series a growth is looked for in, in order. The step peak is what
// fills the device; memory allocated at the step's end is the memory that
// lives from step to step (parameters, gradients, optimizer state and what
// leaks), without the activations whose size follows the batch: under
// variable-length batches its window maxima are far steadier than the
// peaks', so a leak shows there first (TestRecordedVarlenWithLeak).
// Either is projected at its slope from the step peaks' level.
var (
	peakSeries  = series{"step peak", Level.peak}
	floorSeries = series{"memory allocated at step end", func(l Level) int64 { return l.Allocated }}
	allSeries   = []series{peakSeries, floorSeries}
)
