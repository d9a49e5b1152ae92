package torchsnap

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/internal/vsmtest"
	"github.com/vramscope/vramscope/profiler"
)

// extremeFields are what the error for each of hostile.Extremes says.
var extremeFields = map[string]string{
	"times":         `"time_us" is -9223372036854775808`,
	"time-max":      `"time_us" is 9223372036854775807`,
	"size-max":      `"size" is 18446744073709551615`,
	"address-wraps": `"addr" 0xfffffffffffffe00 plus "size" 1024`,
	"segment-max":   `"size" is 9223372036854775808`,
}

// TestExtremeIntegers: every extreme-integer snapshot is refused with an
// error naming the field (the file is named by ReadFile, which wraps it),
// in the pickle and the VSM1 forms alike.
func TestExtremeIntegers(t *testing.T) {
	want := extremeFields
	for name, b := range hostile.Extremes() {
		_, err := Decode(b, profiler.NewFrames(), nil)
		if err == nil || !strings.Contains(err.Error(), want[name]) || !strings.Contains(err.Error(), "entry ") {
			t.Errorf("%s: got %v, want an error naming the entry and %s", name, err, want[name])
		}
	}
}

// TestLimitsAtTheBounds: the largest accepted values decode; one past each
// bound is refused; and sizes that add up past 2^60 are refused even though
// each one is in range.
func TestLimitsAtTheBounds(t *testing.T) {
	ok := hostile.Trace([]hostile.Entry{{Action: "alloc", Addr: 0, Size: MaxBytes, TimeUS: -MaxTimeUS},
		{Action: "alloc", Addr: math.MaxUint64 - MaxBytes, Size: MaxBytes, TimeUS: MaxTimeUS}})
	if _, err := Decode(ok, profiler.NewFrames(), nil); err != nil {
		t.Fatalf("values at the bounds: %v", err)
	}
	for _, e := range []hostile.Entry{{Action: "alloc", Size: 512, TimeUS: MaxTimeUS + 1},
		{Action: "alloc", Size: 512, TimeUS: -MaxTimeUS - 1}, {Action: "alloc", Size: MaxBytes + 1}} {
		if _, err := Decode(hostile.Trace([]hostile.Entry{e}), profiler.NewFrames(), nil); err == nil {
			t.Errorf("%+v decoded", e)
		}
	}
	many := make([]hostile.Entry, MaxTotalBytes/MaxBytes+1)
	for i := range many {
		many[i] = hostile.Entry{Action: "alloc", Addr: uint64(i) * MaxBytes, Size: MaxBytes, TimeUS: int64(i)}
	}
	_, err := Decode(hostile.Trace(many), profiler.NewFrames(), nil)
	if err == nil || !strings.Contains(err.Error(), "add up to more than 2^60") {
		t.Errorf("%d allocations of 2^44 bytes: %v", len(many), err)
	}
}

// TestNaNDuration: a walk's took_ms of NaN or ±Inf reads as 0, so a summary
// that carries it encodes as JSON.
func TestNaNDuration(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -3} {
		b := pkl(dict{{"segments", []any{}}, {"vramscope_tensors", dict{{"version", 1}, {"took_ms", raw(floatOp(v))}, {"entries", []any{}}}}})
		s, err := Decode(b, profiler.NewFrames(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Tensors == nil || s.Tensors.TookMS != 0 {
			t.Errorf("took_ms %v read as %+v", v, s.Tensors)
		}
	}
}

// floatOp is pickle's BINFLOAT opcode for v (big-endian).
func floatOp(v float64) string {
	u := math.Float64bits(v)
	b := []byte{'G'}
	for i := 7; i >= 0; i-- {
		b = append(b, byte(u>>(8*i)))
	}
	return string(b)
}

// TestExtremeIntegersVSM: the same files written as VSM1 by the agent's own
// writer (the stream a capture hands over) are refused alike.
func TestExtremeIntegersVSM(t *testing.T) {
	for name, b := range hostile.Extremes() {
		v := vsmtest.Bytes(t, filepath.Join("..", "..", "jupyter"), hostile.Write(t, name+".pickle", b), 1)
		_, err := Decode(v, profiler.NewFrames(), nil)
		if err == nil || !strings.Contains(err.Error(), "VSM1 chunk at byte") || !strings.Contains(err.Error(), extremeFields[name]) {
			t.Errorf("%s as VSM1: %v, want an error naming the chunk and the entry", name, err)
		}
	}
}

// TestDeviceNumbers: a segment's device and a trace's place in
// device_traces are 0 to MaxDevices-1 (20,000 one-segment devices in 1.5 MB
// made a 30 MB summary).
func TestDeviceNumbers(t *testing.T) {
	seg := func(dev int) dict {
		return dict{{"device", dev}, {"address", 4096}, {"total_size", 2 << 20}, {"blocks", []any{}}}
	}
	if _, err := Decode(pkl(dict{{"segments", []any{seg(0), seg(MaxDevices - 1)}}}), profiler.NewFrames(), nil); err != nil {
		t.Fatalf("devices 0 and %d: %v", MaxDevices-1, err)
	}
	for _, dev := range []int{-1, MaxDevices, 1 << 40} {
		_, err := Decode(pkl(dict{{"segments", []any{seg(0), seg(dev)}}}), profiler.NewFrames(), nil)
		if err == nil || !strings.Contains(err.Error(), "segment 1: \"device\" is") {
			t.Errorf("device %d: %v", dev, err)
		}
	}
	entry := dict{{"action", "alloc"}, {"addr", 0}, {"size", 512}, {"time_us", 1}}
	traces := make([]any, MaxDevices+1)
	for i := range traces {
		traces[i] = []any{}
	}
	traces[MaxDevices] = []any{entry}
	_, err := Decode(pkl(dict{{"segments", []any{}}, {"device_traces", traces}}), profiler.NewFrames(), nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("device_traces[%d] holds entries", MaxDevices)) {
		t.Errorf("a trace of device %d: %v", MaxDevices, err)
	}
}
