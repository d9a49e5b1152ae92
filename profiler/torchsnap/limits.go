package torchsnap

import (
	"fmt"
	"math"

	"github.com/vramscope/vramscope/profiler"
)

// The decoder range-checks every time and size a snapshot carries, so that
// the analyses' arithmetic (differences of times, sums of sizes) cannot
// overflow: a crafted file with time_us -2^63 and 2^62 made the timeline's
// bucket index negative and killed every process that read it.
const (
	// MaxTimeUS bounds |time_us|: 2^53 µs is 285 years either side of 1970,
	// and the largest integer a JSON reader in JavaScript or a Python float
	// keeps exactly. PyTorch writes microseconds since 1970 (about 2^50.6).
	MaxTimeUS = 1 << 53
	// MaxBytes bounds one size (an allocation, a segment, a block, the free
	// memory an OOM reported): 16 TiB, 55 times the largest GPU (288 GB).
	MaxBytes = 1 << 44
	// MaxTotalBytes bounds the sum of every size in a snapshot, so that no
	// sum of them (a level, a site's total, the devices' peaks) overflows an
	// int64: 1 EiB, a million times what a trace of a million 1 GB
	// allocations adds up to.
	MaxTotalBytes = 1 << 60
	// MaxDevices bounds a device number (a segment's "device", a trace's
	// place in device_traces): a node has at most 16 GPUs today. Each device
	// costs an analysis a timeline and allocator maps: 20,000 one-segment
	// devices in 1.5 MB of pickle made a 30 MB summary.
	MaxDevices = 1024
)

// limits adds up a snapshot's sizes against MaxTotalBytes.
type limits struct{ total uint64 }

// checkEvent range-checks one trace event; the error names the entry and
// the field.
func (l *limits) checkEvent(tag int, e *profiler.Event) error {
	err := l.checkTime("time_us", e.TimeUS)
	if err == nil {
		err = l.checkSpan("addr", e.Addr, "size", e.Size)
	}
	if err == nil && e.DeviceFree > MaxBytes {
		err = tooLarge("device_free", e.DeviceFree)
	}
	if err != nil {
		return fmt.Errorf("device trace %d, entry %d: %w", tag, e.Seq, err)
	}
	return nil
}

func (l *limits) checkTime(field string, t int64) error {
	if t > MaxTimeUS || t < -MaxTimeUS {
		return fmt.Errorf("%q is %d: outside ±2^53 µs (285 years around 1970), not a clock's reading", field, t)
	}
	return nil
}

// checkSpan checks a size, that addr+size does not wrap around, and adds
// the size to the total.
func (l *limits) checkSpan(addrField string, addr uint64, sizeField string, size uint64) error {
	if size > MaxBytes {
		return tooLarge(sizeField, size)
	}
	if addr > math.MaxUint64-size {
		return fmt.Errorf("%q %#x plus %q %d passes the end of the address space", addrField, addr, sizeField, size)
	}
	return l.add(size)
}

func (l *limits) add(size uint64) error {
	l.total += size // both at most 2^60 + 2^44: no wrap
	if l.total > MaxTotalBytes {
		return fmt.Errorf("the sizes add up to more than 2^60 bytes (1 EiB): not a real snapshot")
	}
	return nil
}

func tooLarge(field string, n uint64) error {
	return fmt.Errorf("%q is %d: more than 2^44 bytes (16 TiB), larger than any GPU", field, n)
}

func checkDevice(field string, dev int64) error {
	if dev < 0 || dev >= MaxDevices {
		return fmt.Errorf("%q is %d: not a device number (0 to %d)", field, dev, MaxDevices-1)
	}
	return nil
}

// checkSegment range-checks a segment and its blocks.
func (l *limits) checkSegment(s *profiler.Segment) error {
	if err := checkDevice("device", int64(s.Device)); err != nil {
		return err
	}
	if err := l.checkSpan("address", s.Addr, "total_size", s.TotalSize); err != nil {
		return err
	}
	for _, f := range []struct {
		k string
		v uint64
	}{{"allocated_size", s.Allocated}, {"active_size", s.Active}, {"requested_size", s.Requested}} {
		if f.v > MaxBytes {
			return tooLarge(f.k, f.v)
		}
	}
	for i := range s.Blocks {
		b := &s.Blocks[i]
		err := l.checkSpan("address", b.Addr, "size", b.Size)
		if err == nil && b.Requested > MaxBytes {
			err = tooLarge("requested_size", b.Requested)
		}
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return nil
}
