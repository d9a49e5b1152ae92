package daemon

import (
	"math"
	"time"

	"github.com/vramscope/vramscope/daemon/counters"
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
			samples = append(samples, toPhaseSample(s))
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

func toPhaseSample(s counters.DeviceSample) gpuphase.Sample {
	nan := math.NaN()
	g := gpuphase.Sample{TimeMS: s.TimeMS, Device: s.Device, UtilGPU: nan, UtilMem: nan, PowerW: nan, RxMBps: nan, TxMBps: nan,
		MemUsedMiB: nan, MemTotalMiB: nan, SMActive: nan, DRAMBW: nan}
	if s.Has(counters.FieldUtilGPU) {
		g.UtilGPU = float64(s.UtilGPUPct)
	}
	if s.Has(counters.FieldUtilMem) {
		g.UtilMem = float64(s.UtilMemPct)
	}
	if s.Has(counters.FieldPower) {
		g.PowerW = float64(s.PowerMW) / 1000
	}
	if s.Has(counters.FieldPCIeRx) {
		g.RxMBps = float64(s.PCIeRxKBps) * 1024 / 1e6
	}
	if s.Has(counters.FieldPCIeTx) {
		g.TxMBps = float64(s.PCIeTxKBps) * 1024 / 1e6
	}
	if s.Has(counters.FieldMemUsed) {
		g.MemUsedMiB = float64(s.MemUsedBytes) / (1 << 20)
	}
	if s.Has(counters.FieldMemTotal) {
		g.MemTotalMiB = float64(s.MemTotalBytes) / (1 << 20)
	}
	if s.GPM != nil && s.Has(counters.FieldGPMSMActive) {
		g.SMActive = s.GPM.SMActivePct
	}
	if s.GPM != nil && s.Has(counters.FieldGPMDRAMBW) {
		g.DRAMBW = s.GPM.DRAMBWUtilPct
	}
	return g
}
