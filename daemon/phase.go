package daemon

import (
	"time"

	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// phaseWindow is how much recent history names a GPU's current phase.
const phaseWindow = 5 * time.Second

// currentPhases classifies each GPU's last few seconds of counters: what the
// GPU is doing now (compute_bound, pcie_transfer, input_starved, …).
func (c *counterSource) currentPhases() []gpuphase.Phase {
	if !c.st.Available {
		return []gpuphase.Phase{}
	}
	now := time.Now().UnixMilli()
	var samples []gpuphase.Sample
	for _, d := range c.col.Devices() {
		for _, s := range c.col.Series(d.Index, now-phaseWindow.Milliseconds(), 0, 0) {
			samples = append(samples, s.PhaseSample())
		}
	}
	out := []gpuphase.Phase{}
	ps := gpuphase.Phases(samples)
	for i, p := range ps {
		if i == len(ps)-1 || ps[i+1].Device != p.Device {
			out = append(out, p) // the latest phase of each device
		}
	}
	return out
}
