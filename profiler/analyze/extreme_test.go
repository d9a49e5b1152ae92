package analyze_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// TestExtremeSnapshots: each extreme-integer snapshot gets an error naming
// the file and the field, not a panic (round 2's High defect).
func TestExtremeSnapshots(t *testing.T) {
	for name, b := range hostile.Extremes() {
		path := hostile.Write(t, name+".pickle", b)
		_, err := analyze.Run(path, analyze.Options{})
		var pe *analyze.PanicError
		if err == nil || errors.As(err, &pe) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "entry 0") && !strings.Contains(err.Error(), "entry 1") {
			t.Errorf("%s: %v, want an error naming %s and the entry", name, err, path)
		}
	}
}

// FuzzAnalysis runs the whole analysis (timeline, steps, moments,
// periodicity, findings) on snapshots of fuzzed times, sizes and addresses.
// Half of the values are folded into the range the decoder accepts, so the
// analyses' arithmetic sees extremes the decoder lets through; the rest test
// the decoder's checks. No input may panic, and a result must encode as JSON
// (no NaN), as must its report, with a bounded timeline in time order.
func FuzzAnalysis(f *testing.F) {
	f.Add(uint8(0), uint64(0), uint64(512), int64(math.MinInt64), uint8(0), uint64(1024), uint64(512), int64(1<<62), false)
	f.Add(uint8(0), uint64(0), uint64(1<<44), int64(-1<<53), uint8(1), uint64(0), uint64(1<<44), int64(1<<53), true)
	f.Add(uint8(2), uint64(1<<63), uint64(1<<63), int64(1), uint8(3), uint64(1<<63), uint64(1<<63), int64(2), true)
	f.Add(uint8(4), uint64(math.MaxUint64-511), uint64(1024), int64(5), uint8(0), uint64(7), uint64(math.MaxUint64), int64(-5), false)
	f.Fuzz(func(t *testing.T, act1 uint8, addr1, size1 uint64, t1 int64, act2 uint8, addr2, size2 uint64, t2 int64, fold bool) {
		es := []hostile.Entry{entry(act1, addr1, size1, t1, fold), entry(act2, addr2, size2, t2, fold)}
		// A repeating pattern after the two, so steps and periodicity run.
		for i := int64(0); i < 24; i++ {
			es = append(es, entry(act1, addr1+uint64(i%4)*4096, size1, t1+i*1000, fold), entry(act2, addr2, size2, t2-i, fold))
		}
		res, err := analyze.FromBytes("fuzz.pickle", hostile.Trace(es), analyze.Options{})
		var pe *analyze.PanicError
		if errors.As(err, &pe) {
			t.Fatalf("%v\n%s", err, pe.Stack)
		}
		if err != nil {
			return
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("the result does not encode: %v", err)
		}
		if _, err := res.Report(); err != nil {
			t.Fatalf("the report does not encode: %v", err)
		}
		for _, d := range res.Devices {
			pts := d.Timeline.Points
			if len(pts) > analyze.MaxTimelinePoints {
				t.Fatalf("%d timeline points", len(pts))
			}
			for i := 1; i < len(pts); i++ {
				if pts[i].TimeUS < pts[i-1].TimeUS {
					t.Fatalf("timeline point %d at %d before %d", i, pts[i].TimeUS, pts[i-1].TimeUS)
				}
			}
		}
		res.Moments()
		res.Flame(analyze.FlameOptions{})
	})
}

var fuzzActions = []string{"alloc", "free_completed", "segment_alloc", "segment_free", "oom", "free_requested", "segment_map"}

// entry makes a trace entry; fold brings its values into the decoder's range.
func entry(act uint8, addr, size uint64, t int64, fold bool) hostile.Entry {
	if fold {
		size %= torchsnap.MaxBytes + 1
		addr %= math.MaxUint64 - torchsnap.MaxBytes
		t %= torchsnap.MaxTimeUS + 1
	}
	return hostile.Entry{Action: fuzzActions[int(act)%len(fuzzActions)], Addr: addr, Size: size, TimeUS: t}
}
