// ring.go: the compact records the ring buffers keep, the rings, and the
// downsampling that keeps each field's bucket maximum.

package counters

import (
	"cmp"
	"math"
	"sort"
)

// devRecord is a DeviceSample as the ring keeps it: 64 bytes, no pointers.
// Percentages fit a byte, the clock and temperature 16 bits, the GPM metrics
// hundredths of a percent in 16 bits.
type devRecord struct {
	timeMS             int64
	used, total, resv  uint64
	tx, rx, power      uint32
	clock, temp        uint16
	valid              Fields
	utilGPU, utilMem   uint8
	smAct, smOcc, tens uint16
	dram               uint16
}

// procRecord is a ProcessSample as the ring keeps it: 24 bytes.
type procRecord struct {
	timeMS int64
	used   uint64
	valid  ProcFields
	sm     uint8
	mem    uint8
}

func sat8(v uint32) uint8 { return uint8(min(v, math.MaxUint8)) }

func sat16(v uint32) uint16 { return uint16(min(v, math.MaxUint16)) }

// centi stores a percentage in hundredths, saturating.
func centi(v float64) uint16 {
	if !(v > 0) { // also NaN
		return 0
	}
	return uint16(min(math.Round(v*100), math.MaxUint16))
}

func toRecord(s *DeviceSample) devRecord {
	r := devRecord{
		timeMS: s.TimeMS, used: s.MemUsedBytes, total: s.MemTotalBytes, resv: s.MemReservedBytes,
		tx: s.PCIeTxKBps, rx: s.PCIeRxKBps, power: s.PowerMW,
		clock: sat16(s.SMClockMHz), temp: sat16(s.TempC), valid: s.Valid,
		utilGPU: sat8(s.UtilGPUPct), utilMem: sat8(s.UtilMemPct),
	}
	if s.GPM == nil {
		r.valid &^= FieldsGPM
	} else {
		r.smAct, r.smOcc = centi(s.GPM.SMActivePct), centi(s.GPM.SMOccupancyPct)
		r.tens, r.dram = centi(s.GPM.TensorActivePct), centi(s.GPM.DRAMBWUtilPct)
	}
	return r
}

func (r *devRecord) sample(device int, uuid string) DeviceSample {
	s := DeviceSample{
		TimeMS: r.timeMS, Device: device, UUID: uuid, Valid: r.valid,
		MemUsedBytes: r.used, MemTotalBytes: r.total, MemReservedBytes: r.resv,
		UtilGPUPct: uint32(r.utilGPU), UtilMemPct: uint32(r.utilMem),
		PCIeTxKBps: r.tx, PCIeRxKBps: r.rx, PowerMW: r.power,
		TempC: uint32(r.temp), SMClockMHz: uint32(r.clock),
	}
	if r.valid&FieldsGPM != 0 {
		s.GPM = &GPMSample{
			SMActivePct: float64(r.smAct) / 100, SMOccupancyPct: float64(r.smOcc) / 100,
			TensorActivePct: float64(r.tens) / 100, DRAMBWUtilPct: float64(r.dram) / 100,
		}
	}
	return s
}

// ring is a bounded buffer of records in time order. It grows by append up to
// its capacity, so a short history costs little, then overwrites the oldest.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest record once full
	cap  int
}

func (r *ring[T]) push(v T) {
	if len(r.buf) < r.cap {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.head] = v
	r.head++
	if r.head == r.cap {
		r.head = 0
	}
}

func (r *ring[T]) len() int { return len(r.buf) }

// at returns the i-th oldest record.
func (r *ring[T]) at(i int) *T {
	i += r.head
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	return &r.buf[i]
}

func (r *ring[T]) last() *T {
	if len(r.buf) == 0 {
		return nil
	}
	return r.at(len(r.buf) - 1)
}

// span returns the index range [lo, hi) of the records with fromMS <= time <=
// toMS (toMS <= 0: no upper bound), the records being in time order.
func (r *ring[T]) span(timeOf func(*T) int64, fromMS, toMS int64) (int, int) {
	n := r.len()
	lo := sort.Search(n, func(i int) bool { return timeOf(r.at(i)) >= fromMS })
	hi := n
	if toMS > 0 {
		hi = sort.Search(n, func(i int) bool { return timeOf(r.at(i)) > toMS })
	}
	return lo, max(lo, hi)
}

// pick chooses which records of [lo, hi) a query returns: all of them when
// there are at most maxPoints (or maxPoints <= 0), otherwise one per each of
// maxPoints equal buckets (by index): the record with the largest weight
// (memory; the first on ties), so a peak is never averaged or skipped away,
// with every other field raised to its maximum over the bucket's records
// that have it (fields read once a second would otherwise mostly vanish).
func pick[T any](r *ring[T], lo, hi, maxPoints int, weight func(*T) uint64, merge func(dst, src *T), emit func(*T)) {
	n := hi - lo
	if maxPoints <= 0 || n <= maxPoints {
		for i := lo; i < hi; i++ {
			emit(r.at(i))
		}
		return
	}
	for b := 0; b < maxPoints; b++ {
		start := lo + b*n/maxPoints
		end := lo + (b+1)*n/maxPoints
		best := r.at(start)
		for i := start + 1; i < end; i++ {
			if v := r.at(i); weight(v) > weight(best) {
				best = v
			}
		}
		acc := *best
		for i := start; i < end; i++ {
			merge(&acc, r.at(i))
		}
		emit(&acc)
	}
}

// maxField raises *a to b for field f when b has it and a lacks it or is
// smaller.
func maxField[T cmp.Ordered](av *Fields, bv, f Fields, a *T, b T) {
	if bv&f != 0 && (*av&f == 0 || b > *a) {
		*a = b
		*av |= f
	}
}

// maxWith raises every field of r to b's where b has it, keeping r's time.
func (r *devRecord) maxWith(b *devRecord) {
	v := b.valid
	maxField(&r.valid, v, FieldMemUsed, &r.used, b.used)
	maxField(&r.valid, v, FieldMemTotal, &r.total, b.total)
	maxField(&r.valid, v, FieldMemReserved, &r.resv, b.resv)
	maxField(&r.valid, v, FieldUtilGPU, &r.utilGPU, b.utilGPU)
	maxField(&r.valid, v, FieldUtilMem, &r.utilMem, b.utilMem)
	maxField(&r.valid, v, FieldPCIeTx, &r.tx, b.tx)
	maxField(&r.valid, v, FieldPCIeRx, &r.rx, b.rx)
	maxField(&r.valid, v, FieldPower, &r.power, b.power)
	maxField(&r.valid, v, FieldTemp, &r.temp, b.temp)
	maxField(&r.valid, v, FieldSMClock, &r.clock, b.clock)
	maxField(&r.valid, v, FieldGPMSMActive, &r.smAct, b.smAct)
	maxField(&r.valid, v, FieldGPMSMOccupancy, &r.smOcc, b.smOcc)
	maxField(&r.valid, v, FieldGPMTensorActive, &r.tens, b.tens)
	maxField(&r.valid, v, FieldGPMDRAMBW, &r.dram, b.dram)
}

func (r *procRecord) maxWith(b *procRecord) {
	v := Fields(b.valid)
	av := Fields(r.valid)
	maxField(&av, v, Fields(ProcUsed), &r.used, b.used)
	maxField(&av, v, Fields(ProcSMUtil), &r.sm, b.sm)
	maxField(&av, v, Fields(ProcMemUtil), &r.mem, b.mem)
	r.valid = ProcFields(av)
}
