package profiler

import "testing"

func TestParseAction(t *testing.T) {
	for s, want := range map[string]Action{
		"alloc": ActAlloc, "free_requested": ActFreeRequested, "free_completed": ActFreeCompleted,
		"segment_alloc": ActSegmentAlloc, "segment_free": ActSegmentFree, "segment_map": ActSegmentMap,
		"segment_unmap": ActSegmentUnmap, "snapshot": ActSnapshot, "oom": ActOOM, "user_defined": ActAnnotate,
		"": ActUnknown, "bogus": ActUnknown,
	} {
		if got := ParseAction(s); got != want {
			t.Errorf("ParseAction(%q) = %v, want %v", s, got, want)
		}
		if want != ActUnknown && want != ActAnnotate && want.String() != s {
			t.Errorf("%v.String() = %q, want %q", want, want.String(), s)
		}
	}
	if s := Action(200).String(); s != "unknown" {
		t.Errorf("Action(200) = %q", s)
	}
}

func TestParseBlockState(t *testing.T) {
	for s, want := range map[string]BlockState{
		"active_allocated": BlockActiveAllocated, "active_pending_free": BlockActivePendingFree,
		"active_awaiting_free": BlockActivePendingFree, "inactive": BlockInactive, "": BlockInactive,
	} {
		if got := ParseBlockState(s); got != want {
			t.Errorf("ParseBlockState(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestFramesInterning(t *testing.T) {
	fr := NewFrames()
	if fr.NumStacks() != 1 || len(fr.StackAt(0)) != 0 || fr.Stack(nil) != 0 {
		t.Fatal("a new table must hold exactly the empty stack, as StackID 0")
	}
	a := fr.Frame(Frame{File: "a.py", Line: 1, Func: "f"})
	b := fr.Frame(Frame{File: "b.py", Line: 2, Func: "g"})
	if a2 := fr.Frame(Frame{File: "a.py", Line: 1, Func: "f"}); a2 != a || fr.NumFrames() != 2 {
		t.Errorf("frame interned twice: %d, %d; %d frames", a, a2, fr.NumFrames())
	}
	ids := []FrameID{a, b}
	s1 := fr.Stack(ids)
	ids[0] = b // the table keeps its own copy
	if got := fr.StackAt(s1); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("StackAt = %v", got)
	}
	if s2 := fr.Stack([]FrameID{a, b}); s2 != s1 {
		t.Errorf("same stack interned as %d and %d", s1, s2)
	}
	if s3 := fr.Stack([]FrameID{b, a}); s3 == s1 || s3 == 0 {
		t.Errorf("reversed stack got id %d", s3)
	}
	// Frame IDs above 255 must not collide in the stack key.
	for i := 0; i < 300; i++ {
		fr.Frame(Frame{File: "c.py", Line: i})
	}
	hi := fr.Frame(Frame{File: "c.py", Line: 256})
	lo := fr.Frame(Frame{File: "c.py", Line: 0})
	if fr.Stack([]FrameID{hi}) == fr.Stack([]FrameID{lo}) {
		t.Error("stacks of different frames share an id")
	}
	if f := fr.FrameAt(b); f.File != "b.py" || f.Line != 2 || f.Func != "g" {
		t.Errorf("FrameAt = %+v", f)
	}
}

func TestPrivatePool(t *testing.T) {
	if (&Segment{}).PrivatePool() {
		t.Error("pool (0, 0) is the default pool")
	}
	if !(&Segment{PoolID: [2]int64{1, 0}}).PrivatePool() || !(&Segment{PoolID: [2]int64{0, 3}}).PrivatePool() {
		t.Error("a nonzero pool id is a private pool")
	}
}
