package forecast

// Params are the thresholds of a projection. Default holds the values the
// recorded runs in testdata/ were checked against (docs/oom-warning.md).
type Params struct {
	// WarmupSteps and WarmupShare: the steps below max(WarmupSteps,
	// WarmupShare of the last step) are left out (optimizer state, caches
	// that fill).
	WarmupSteps int
	WarmupShare float64
	// Spans are the numbers of recent steps tried, shortest first; the
	// longest span that shows sustained growth is the evidence.
	Spans []int
	// MinWindowSteps is the fewest steps in a window (more than a
	// gradient-accumulation cycle); Windows the windows of a span, at most.
	MinWindowSteps int
	Windows        int
	// MinConsistency is the least Kendall's tau of the window maxima.
	MinConsistency float64
	// MinThirdShare: every third of the span must rise at least this share
	// of the whole span's slope (sustained, not a jump or a growth that stopped).
	MinThirdShare float64
	// MinRise is the least rise over the span in bytes; MinRiseShare the
	// same as a share of the capacity; NoiseFactor the rise over the noise.
	MinRise      int64
	MinRiseShare float64
	NoiseFactor  float64
	// MaxExtrapolation bounds the projection: a full device further away
	// than this many spans is not projected (the trend says too little).
	MaxExtrapolation float64
}

// Default are the thresholds vramscope uses.
func Default() Params {
	return Params{
		WarmupSteps:      50,
		WarmupShare:      0.1,
		Spans:            []int{200, 400, 800, 1600, 3200},
		MinWindowSteps:   16,
		Windows:          15,
		MinConsistency:   0.6,
		MinThirdShare:    0.4,
		MinRise:          16 << 20,
		MinRiseShare:     1.0 / 256,
		NoiseFactor:      4,
		MaxExtrapolation: 10,
	}
}
