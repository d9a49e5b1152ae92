package torchsnap

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// The generated layouts (testdata/gen_variants.py) are compared with Python
// in TestSnapshotsMatchPython; these tests state the properties each layout
// exists for.

// TestLegacyHistory reads the pre-2.1 layout: blocks have no address (each
// starts where the previous one ends), and their requested size and stack come
// from history.
func TestLegacyHistory(t *testing.T) {
	d := readAll(t, filepath.Join(variantDir, "legacy_history.pickle"))
	s := d.snap
	if !s.Legacy {
		t.Error("Legacy is false for a snapshot whose blocks carry history")
	}
	if len(s.TraceDevices) != 0 || len(d.col.traces) != 0 {
		t.Errorf("traces %v from a snapshot without device_traces", s.TraceDevices)
	}
	if len(s.Segments) != 4 {
		t.Fatalf("%d segments, want 4", len(s.Segments))
	}
	withStack := 0
	for i, seg := range s.Segments {
		addr := seg.Addr
		for j, b := range seg.Blocks {
			if b.Addr != addr {
				t.Errorf("segment %d block %d at %#x, want %#x (the previous block's end)", i, j, b.Addr, addr)
			}
			addr += b.Size
			if b.Stack != 0 {
				withStack++
			}
		}
		if addr != seg.Addr+seg.TotalSize {
			t.Errorf("segment %d: blocks end at %#x, segment at %#x", i, addr, seg.Addr+seg.TotalSize)
		}
	}
	if withStack == 0 {
		t.Error("no block got a stack from its history")
	}
	// The first active block's history has two entries; PyTorch reads the
	// first (the newest allocation): requested = size - 100, stack from
	// Adam's _init_group, not the older 8 MiB request from old_alloc.py.
	t.Run("history[0] is the newest", func(t *testing.T) {
		b := s.Segments[0].Blocks[0]
		if b.Requested != b.Size-100 {
			t.Errorf("block 0: requested %d, want history[0].real_size = %d", b.Requested, b.Size-100)
		}
		if st := d.fr.StackAt(b.Stack); len(st) == 0 || d.fr.FrameAt(st[0]).Func != "_init_group" {
			t.Errorf("block 0: stack %q, want history[0]'s, innermost _init_group", stackKey(d.fr, b.Stack))
		}
	})
	// The second has no history (allocated before recording began): PyTorch
	// takes its size as the requested size.
	t.Run("no history: requested is the size", func(t *testing.T) {
		b := s.Segments[0].Blocks[1]
		if b.State != profiler.BlockActiveAllocated || b.Requested != b.Size || b.Stack != 0 {
			t.Errorf("block 1 without history: %+v, want requested = size and no stack", b)
		}
	})
}

// TestMultiDevice reads a snapshot with device 0 and device 2 active and an
// empty trace for device 1 between them.
func TestMultiDevice(t *testing.T) {
	d := readAll(t, filepath.Join(variantDir, "multi_device.pickle"))
	s := d.snap
	if fmt.Sprint(s.TraceDevices) != "[0 2]" {
		t.Fatalf("TraceDevices %v, want [0 2] (device 1's trace is empty)", s.TraceDevices)
	}
	if len(s.TraceEvents) != 2 || s.TraceEvents[0] != s.TraceEvents[1] || s.TraceEvents[0] == 0 {
		t.Fatalf("TraceEvents %v, want two equal non-zero counts", s.TraceEvents)
	}
	t0, t1 := d.col.traces[0].events, d.col.traces[1].events
	for i := range t0 {
		e0, e1 := t0[i], t1[i]
		shift := uint64(0)
		if e0.Addr != 0 {
			shift = 1 << 40
		}
		if e1.Addr != e0.Addr+shift || e1.Action != e0.Action || e1.Size != e0.Size || e1.Stack != e0.Stack {
			t.Fatalf("event %d on device 2: %+v, device 0: %+v", i, e1, e0)
		}
	}
	n := len(s.Segments) / 2
	if len(s.Segments) != 2*n || n == 0 {
		t.Fatalf("%d segments, want an even number", len(s.Segments))
	}
	for i := 0; i < n; i++ {
		a, b := s.Segments[i], s.Segments[n+i]
		if a.Device != 0 || b.Device != 2 || b.Addr != a.Addr+1<<40 || len(a.Blocks) != len(b.Blocks) {
			t.Fatalf("segment %d: device %d at %#x, copy: device %d at %#x", i, a.Device, a.Addr, b.Device, b.Addr)
		}
		for j := range a.Blocks {
			if b.Blocks[j].Addr != a.Blocks[j].Addr+1<<40 || b.Blocks[j].Stack != a.Blocks[j].Stack {
				t.Fatalf("segment %d block %d differs from its copy", i, j)
			}
		}
	}
	devs := map[int]int{}
	for _, a := range s.Annotations {
		devs[a.Device]++
	}
	if len(devs) != 2 || devs[0] != devs[2] {
		t.Errorf("annotations per device %v", devs)
	}
}

// TestFirstTraceEmpty: device 0 recorded nothing, so trace number 0 is
// device 1's.
func TestFirstTraceEmpty(t *testing.T) {
	d := readAll(t, filepath.Join(variantDir, "first_trace_empty.pickle"))
	if fmt.Sprint(d.snap.TraceDevices) != "[1]" || len(d.col.traces) != 1 {
		t.Fatalf("TraceDevices %v, want [1]", d.snap.TraceDevices)
	}
	for _, seg := range d.snap.Segments {
		if seg.Device != 1 {
			t.Fatalf("segment on device %d, want 1", seg.Device)
		}
	}
}

// TestOptionalAndUnknownKeys reads a snapshot with optional keys left out and
// unknown keys added everywhere, an old action name, an unknown action, None
// stream and time, and a 2,500-frame stack.
func TestOptionalAndUnknownKeys(t *testing.T) {
	d := readAll(t, filepath.Join(variantDir, "variants.pickle"))
	ev := d.col.traces[0].events
	if ev[0].Stream != 0 || ev[1].TimeUS != 0 {
		t.Errorf("None stream/time_us: %+v %+v", ev[0], ev[1])
	}
	var noFrames, withMeta, unknown, free int
	for i, e := range ev {
		if i%3 == 1 && i < 21 && e.Stack != 0 {
			t.Errorf("event %d has no frames key but stack %d", i, e.Stack)
		}
		if e.Stack == 0 {
			noFrames++
		}
		if e.UserMeta != "" {
			withMeta++
		}
		switch e.Action {
		case profiler.ActUnknown:
			unknown++
		case profiler.ActFreeRequested:
			free++
		}
	}
	if unknown != 1 || withMeta == 0 || noFrames == 0 || free != 4 {
		t.Errorf("unknown actions %d (want 1), events with user_metadata %d, without frames %d, free_requested %d (want 4)",
			unknown, withMeta, noFrames, free)
	}
	var deep profiler.StackID
	for _, e := range ev {
		if len(d.fr.StackAt(e.Stack)) == 2500 {
			deep = e.Stack
		}
	}
	if deep == 0 {
		t.Fatal("no event kept the 2,500-frame stack")
	}
	for i, id := range d.fr.StackAt(deep) {
		if d.fr.FrameAt(id).Line != i+1 {
			t.Fatalf("frame %d of the deep stack has line %d: frames out of order across APPENDS batches", i, d.fr.FrameAt(id).Line)
		}
	}
	pools := 0
	for _, seg := range d.snap.Segments {
		if seg.PrivatePool() {
			pools++
		}
	}
	if pools == 0 {
		t.Error("no segment kept its segment_pool_id")
	}
	if d.snap.Settings.Raw == nil || d.snap.Settings.MaxSplitSize != -1 {
		t.Errorf("settings %+v", d.snap.Settings)
	}
}

// TestBareSegments reads torch 1.x's memory_snapshot(): a list of segments.
func TestBareSegments(t *testing.T) {
	d := readAll(t, filepath.Join(variantDir, "bare_segments.pickle"))
	if len(d.snap.Segments) != 9 || len(d.snap.TraceDevices) != 0 {
		t.Fatalf("%d segments, traces %v; want 9 and none", len(d.snap.Segments), d.snap.TraceDevices)
	}
}

// TestTracesOnly reads a snapshot dict with device_traces and no segments.
func TestTracesOnly(t *testing.T) {
	d := readAll(t, filepath.Join(variantDir, "traces_only.pickle"))
	if len(d.snap.Segments) != 0 || fmt.Sprint(d.snap.TraceEvents) != "[21]" {
		t.Fatalf("%d segments, TraceEvents %v; want none and [21]", len(d.snap.Segments), d.snap.TraceEvents)
	}
}

// TestDecodeMatchesReadFile: the in-memory and file readers agree, and
// ReadFile reports progress within the file's two passes.
func TestDecodeMatchesReadFile(t *testing.T) {
	path := filepath.Join(exampleDir, "example_train.pickle")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr := profiler.NewFrames()
	col := newCollector(fr)
	s1, err := Decode(b, fr, col.onEvent)
	if err != nil {
		t.Fatal(err)
	}
	var last, calls int64
	fr2 := profiler.NewFrames()
	col2 := newCollector(fr2)
	s2, err := ReadFile(path, fr2, col2.onEvent, Options{Progress: func(done, total int64) {
		if done < last || done > total || total != 2*int64(len(b)) {
			t.Errorf("progress %d of %d after %d", done, total, last)
		}
		last = done
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Error("Progress was never called")
	}
	if s1.Bytes != int64(len(b)) || s2.Bytes != s1.Bytes || s2.Path != path {
		t.Errorf("Bytes %d/%d, Path %q", s1.Bytes, s2.Bytes, s2.Path)
	}
	if col.digest(0) != col2.digest(0) || fmt.Sprint(s1.Segments) != fmt.Sprint(s2.Segments) ||
		fmt.Sprint(s1.TraceEvents) != fmt.Sprint(s2.TraceEvents) {
		t.Error("Decode and ReadFile read the same file differently")
	}
}
