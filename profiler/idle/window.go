package idle

// window is the time between two utilisation readings and the GPU's idle
// time in it.
type window struct {
	fromMS, toMS int64
	idleMS       float64
	copyOnly     bool // utilization.gpu read busy while no SM was: the GPU only copied
}

// Defaults of Options.
const (
	DefaultMaxGapMS     = 5000
	DefaultCopySMActive = 5.0
	DefaultTopLines     = 5
)

// Options tune the join; zero fields take the defaults.
type Options struct {
	// MaxGapMS: two readings further apart than this do not make a window
	// (the sampler stopped, or the process was not on the GPU).
	MaxGapMS int64
	// CopySMActive: below this GPM SM activity (percent), a busy
	// utilization.gpu is a copy, and the GPU counts as idle for compute.
	CopySMActive float64
	// TopLines bounds the lines listed per cause.
	TopLines int
}

func (o Options) withDefaults() Options {
	if o.MaxGapMS <= 0 {
		o.MaxGapMS = DefaultMaxGapMS
	}
	if o.CopySMActive <= 0 {
		o.CopySMActive = DefaultCopySMActive
	}
	if o.TopLines <= 0 {
		o.TopLines = DefaultTopLines
	}
	return o
}

// busy is the share of a reading's interval the GPU computed, and whether
// the reading was a copy that utilization.gpu counts as busy (NVML reads
// ~97% during pure PCIe copies; GPM's SM activity does not).
func busy(u Util, o Options) (float64, bool) {
	b := min(max(u.GPU, 0), 100) / 100
	if u.SMActive >= 0 && u.SMActive < o.CopySMActive && u.GPU > 50 {
		return u.SMActive / 100, true
	}
	return b, false
}

// windows turns readings with utilization.gpu into windows, in time order.
func windows(us []Util, o Options) []window {
	var out []window
	prev := int64(-1)
	for _, u := range us {
		if u.GPU < 0 {
			continue
		}
		if prev >= 0 && u.TimeMS > prev && u.TimeMS-prev <= o.MaxGapMS {
			b, cp := busy(u, o)
			out = append(out, window{fromMS: prev, toMS: u.TimeMS, idleMS: (1 - b) * float64(u.TimeMS-prev), copyOnly: cp})
		}
		prev = u.TimeMS
	}
	return out
}
