package analyze_test

import (
	"testing"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// TestMomentsReplay checks the live set of every moment against a replay of
// the same trace written here: the bytes live at the end of each bucket, every
// origin's level never below zero, and the base equal to the pre-trace bytes.
func TestMomentsReplay(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			need(t, in.path)
			r := result(t, in.name)
			m := r.Moments()
			if m == nil {
				t.Skip("no trace")
			}
			checkMomentShape(t, m)
			want := replayLevels(t, in.path, m)
			levels := map[int64]int64{}
			var base, cum int64
			for i := 0; i < len(m.Base); i += 2 {
				levels[m.Base[i]] += m.Base[i+1]
				base += m.Base[i+1]
			}
			if d := deviceOf(t, r, m.Device); base != d.PreTraceBytes {
				t.Errorf("base %d bytes, pre-trace bytes %d", base, d.PreTraceBytes)
			}
			for i, row := range m.Buckets {
				for j := 0; j < len(row); j += 2 {
					cum += row[j+1] * m.Unit
					levels[row[j]] += row[j+1] * m.Unit
				}
				if cum != want[i] {
					t.Fatalf("bucket %d: live %d bytes above the base, replay %d", i, cum, want[i])
				}
				for o, v := range levels {
					if v < 0 {
						t.Fatalf("bucket %d: origin %d at %d bytes", i, o, v)
					}
				}
			}
		})
	}
}

func checkMomentShape(t *testing.T, m *analyze.Moments) {
	t.Helper()
	if len(m.Buckets) == 0 || len(m.Buckets) > analyze.MaxMoments || m.WidthUS < 1 {
		t.Fatalf("%d buckets of %d us", len(m.Buckets), m.WidthUS)
	}
	if len(m.Sites) != len(m.Origins) {
		t.Fatalf("%d sites for %d origins", len(m.Sites), len(m.Origins))
	}
	for i, path := range m.Origins {
		for _, f := range path {
			if f < 0 || int(f) >= len(m.Frames) {
				t.Fatalf("origin %d: frame %d of %d", i, f, len(m.Frames))
			}
		}
	}
}

// replayLevels replays the allocations and frees of m's device and returns
// the bytes live at the end of each of m's buckets, relative to the start.
func replayLevels(t *testing.T, path string, m *analyze.Moments) []int64 {
	t.Helper()
	type ev struct {
		t, addr, size int64
		alloc         bool
	}
	byTrace := map[int][]ev{}
	on := func(trace int, e *profiler.Event) error {
		switch e.Action {
		case profiler.ActAlloc, profiler.ActFreeCompleted:
			byTrace[trace] = append(byTrace[trace], ev{e.TimeUS, int64(e.Addr), int64(e.Size), e.Action == profiler.ActAlloc})
		}
		return nil
	}
	snap, err := torchsnap.ReadFile(path, profiler.NewFrames(), on, torchsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var events []ev
	for trace, dev := range snap.TraceDevices {
		if dev == m.Device {
			events = byTrace[trace]
		}
	}
	block := func(n int64) int64 { return max(512, (n+511)/512*512) }
	out := make([]int64, len(m.Buckets))
	set := make([]bool, len(m.Buckets))
	live := map[int64]int64{}
	var level, idx int64
	for _, e := range events {
		idx = max(idx, (e.t-m.StartUS)/m.WidthUS)
		if old, ok := live[e.addr]; ok {
			level -= old // freed, or allocated over (its free fell outside the ring)
			delete(live, e.addr)
		} else if !e.alloc {
			level -= block(e.size) // allocated before the trace
		}
		if e.alloc {
			live[e.addr] = block(e.size)
			level += block(e.size)
		}
		if idx >= int64(len(out)) {
			t.Fatalf("event at %d us past the last bucket", e.t)
		}
		out[idx], set[idx] = level, true
	}
	for i := 1; i < len(out); i++ {
		if !set[i] {
			out[i] = out[i-1]
		}
	}
	return out
}
