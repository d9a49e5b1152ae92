package torchsnap

import (
	"runtime"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler"
)

// TestDeepStack decodes a 600,000-frame stack (1.2 MB): the event's stack
// keeps profiler.MaxStackDepth frames, the middle ones named by one frame.
func TestDeepStack(t *testing.T) {
	fr := profiler.NewFrames()
	var stack profiler.StackID
	_, err := Decode(hostile.DeepStack(600_000), fr, func(_ int, e *profiler.Event) error {
		stack = e.Stack
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := fr.StackAt(stack)
	if len(ids) != profiler.MaxStackDepth {
		t.Fatalf("%d frames, want %d", len(ids), profiler.MaxStackDepth)
	}
	want := profiler.ElidedFrame(600_000 - profiler.MaxStackDepth + 1)
	elided := 0
	for _, id := range ids {
		if fr.FrameAt(id) == want {
			elided++
		}
	}
	if elided != 1 || fr.FrameAt(ids[0]).File != "a.py" || fr.FrameAt(ids[len(ids)-1]).File != "a.py" {
		t.Errorf("%d elided frames (want 1), first %+v, last %+v", elided, fr.FrameAt(ids[0]), fr.FrameAt(ids[len(ids)-1]))
	}
	if n := fr.NumStacks(); n != 2 {
		t.Errorf("%d stacks interned, want 2 (the empty one and the entry's)", n)
	}
}

// TestLongFramesListLinear bounds what decoding one long frames list
// allocates. A pickler writes it in APPENDS of 1,000; the decoder interned an
// intermediate stack after each, so n frames cost O(n²/1000): 163 MB for these
// 200,000 (a peak of 4.5 GB for 1,000,000). Linear, it is about 5 MB.
func TestLongFramesListLinear(t *testing.T) {
	b := hostile.DeepStack(200_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := Decode(b, profiler.NewFrames(), nil); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	const limit = 32 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Errorf("decoding %d bytes (200,000 frames) allocated %d MB, want under %d MB", len(b), got>>20, limit>>20)
	} else {
		t.Logf("decoding %d bytes (200,000 frames) allocated %.1f MB", len(b), float64(got)/(1<<20))
	}
}

// TestGrownStackRefused: frames appended to a list after a trace entry took
// it as its stack, or to a list after another frames list began, are refused
// with an error: the decoder streams entries and cannot revise one, and
// re-interning a grown list for each use made stacks cost O(1) bytes of input
// each, unbounded in memory. Python writes neither.
func TestGrownStackRefused(t *testing.T) {
	frame := dict{{"filename", "a.py"}, {"line", 1}, {"name", "f"}}
	f := string(enc(nil, frame))
	entry := func(frames any) dict {
		return dict{{"action", "alloc"}, {"addr", 4096}, {"size", 512}, {"frames", frames}}
	}
	for name, b := range map[string][]byte{
		// The trace's entry uses L (memo 0); then L gains a frame.
		"after use": pkl(dict{{"segments", []any{}}, {"device_traces", []any{[]any{entry(raw("]q\x00" + f + "a"))}}},
			{"later", raw("h\x00" + f + "a")}}),
		// L (memo 0) and M take turns: M begins, then L gains a frame.
		"interleaved": pkl(dict{{"segments", []any{}}, {"device_traces", []any{[]any{
			entry(raw("]q\x00" + f + "a")),
			entry(raw("]q\x01" + f + "a" + "h\x00" + f + "a0")),
		}}}}),
	} {
		_, err := decodeSafe(t, b)
		if err == nil || !strings.Contains(err.Error(), "gains frames") {
			t.Errorf("%s: %v, want the grown frames list refused", name, err)
		}
	}
}
