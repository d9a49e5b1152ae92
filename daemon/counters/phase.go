package counters

import (
	"math"

	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// PhaseSample is s as profiler/gpuphase classifies it (NaN: no data), the
// same figures gpuphase.ReadFile reads from s's JSON (a test checks both).
func (s DeviceSample) PhaseSample() gpuphase.Sample {
	nan := math.NaN()
	g := gpuphase.Sample{TimeMS: s.TimeMS, Device: s.Device, UtilGPU: nan, UtilMem: nan, PowerW: nan, RxMBps: nan, TxMBps: nan,
		MemUsedMiB: nan, MemTotalMiB: nan, SMActive: nan, DRAMBW: nan}
	if s.Has(FieldUtilGPU) {
		g.UtilGPU = float64(s.UtilGPUPct)
	}
	if s.Has(FieldUtilMem) {
		g.UtilMem = float64(s.UtilMemPct)
	}
	if s.Has(FieldPower) {
		g.PowerW = float64(s.PowerMW) / 1000
	}
	if s.Has(FieldPCIeRx) {
		g.RxMBps = float64(s.PCIeRxKBps) * 1024 / 1e6
	}
	if s.Has(FieldPCIeTx) {
		g.TxMBps = float64(s.PCIeTxKBps) * 1024 / 1e6
	}
	if s.Has(FieldMemUsed) {
		g.MemUsedMiB = float64(s.MemUsedBytes) / (1 << 20)
	}
	if s.Has(FieldMemTotal) {
		g.MemTotalMiB = float64(s.MemTotalBytes) / (1 << 20)
	}
	if s.GPM != nil && s.Has(FieldGPMSMActive) {
		g.SMActive = s.GPM.SMActivePct
	}
	if s.GPM != nil && s.Has(FieldGPMDRAMBW) {
		g.DRAMBW = s.GPM.DRAMBWUtilPct
	}
	return g
}
