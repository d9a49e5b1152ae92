package torchsnap

import (
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// TestSharedTraceEntry reads snapshots whose traces hold one entry dict
// several times (memo GETs of the entry, as an edited or merged snapshot
// has them). They were made by Python's pickle (protocols 2 and 4) from
//
//	f = {'name': 'step', 'filename': 'train.py', 'line': 7}
//	e = {'action': 'alloc', 'addr': 4096, 'size': 512, 'stream': 0, 'time_us': 1, 'frames': [f]}
//	g = {'action': 'free_requested', 'addr': 4096, 'size': 512, 'stream': 0, 'time_us': 2, 'frames': [f]}
//	{'segments': [], 'device_traces': [[e], [e, g, e, e]]}
//
// The decoder used to recycle the entry dict after its first use although a
// memo read had handed it out again, and refused the second as having no
// "action".
func TestSharedTraceEntry(t *testing.T) {
	for _, name := range []string{"shared_entry_p2.pickle", "shared_entry_p4.pickle"} {
		t.Run(name, func(t *testing.T) {
			fr := profiler.NewFrames()
			var got []profiler.Event
			var traces []int
			_, err := ReadFile(filepath.Join(variantDir, name), fr, func(trace int, e *profiler.Event) error {
				got = append(got, *e)
				traces = append(traces, trace)
				return nil
			}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := []profiler.Action{profiler.ActAlloc, profiler.ActAlloc, profiler.ActFreeRequested, profiler.ActAlloc, profiler.ActAlloc}
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d", len(got), len(want))
			}
			for i, e := range got {
				if e.Action != want[i] || e.Addr != 4096 || e.Size != 512 {
					t.Errorf("event %d: %+v", i, e)
				}
				st := fr.StackAt(e.Stack)
				if len(st) != 1 || fr.FrameAt(st[0]) != (profiler.Frame{File: "train.py", Line: 7, Func: "step"}) {
					t.Errorf("event %d: stack %v", i, st)
				}
			}
			if traces[0] != 0 || traces[1] != 1 || traces[4] != 1 {
				t.Errorf("traces %v, want the first event in trace 0, the rest in trace 1", traces)
			}
		})
	}
}
