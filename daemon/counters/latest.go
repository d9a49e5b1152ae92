// latest.go: the newest value of every field of a GPU, each from the newest
// sample that has it (at most LatestMaxAge old).

package counters

// latestState is one GPU's newest value of every field, and when each was
// read.
type latestState struct {
	s  DeviceSample // GPM nil: the values are in g
	g  GPMSample
	at [16]int64 // per Fields bit: unix ms of the sample it came from
}

// update takes the fields src has and drops those older than maxAgeMS.
func (st *latestState) update(src *DeviceSample, timeMS, maxAgeMS int64) {
	v := src.Valid
	if src.GPM == nil {
		v &^= FieldsGPM
	}
	st.s.TimeMS, st.s.Device = timeMS, src.Device
	if src.UUID != "" {
		st.s.UUID = src.UUID
	}
	var zero DeviceSample
	for b := range st.at {
		f := Fields(1) << b
		switch {
		case v&f != 0:
			copyField(&st.s, &st.g, src, src.GPM, f)
			st.at[b] = timeMS
			st.s.Valid |= f
		case st.s.Valid&f != 0 && timeMS-st.at[b] > maxAgeMS:
			copyField(&st.s, &st.g, &zero, &GPMSample{}, f)
			st.s.Valid &^= f
		}
	}
}

// copyField copies field f from (src, srcG) to (dst, dstG).
func copyField(dst *DeviceSample, dstG *GPMSample, src *DeviceSample, srcG *GPMSample, f Fields) {
	switch f {
	case FieldMemUsed:
		dst.MemUsedBytes = src.MemUsedBytes
	case FieldMemTotal:
		dst.MemTotalBytes = src.MemTotalBytes
	case FieldMemReserved:
		dst.MemReservedBytes = src.MemReservedBytes
	case FieldUtilGPU:
		dst.UtilGPUPct = src.UtilGPUPct
	case FieldUtilMem:
		dst.UtilMemPct = src.UtilMemPct
	case FieldPCIeTx:
		dst.PCIeTxKBps = src.PCIeTxKBps
	case FieldPCIeRx:
		dst.PCIeRxKBps = src.PCIeRxKBps
	case FieldPower:
		dst.PowerMW = src.PowerMW
	case FieldTemp:
		dst.TempC = src.TempC
	case FieldSMClock:
		dst.SMClockMHz = src.SMClockMHz
	case FieldGPMSMActive:
		dstG.SMActivePct = srcG.SMActivePct
	case FieldGPMSMOccupancy:
		dstG.SMOccupancyPct = srcG.SMOccupancyPct
	case FieldGPMTensorActive:
		dstG.TensorActivePct = srcG.TensorActivePct
	case FieldGPMDRAMBW:
		dstG.DRAMBWUtilPct = srcG.DRAMBWUtilPct
	}
}
