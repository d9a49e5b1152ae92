package profiler

import (
	"testing"
)

// TestStackDepthBounded interns a 600,000-frame stack: it keeps its
// innermost and outermost frames with one frame naming what it left out, and
// interning the result again gives the same stack.
func TestStackDepthBounded(t *testing.T) {
	fr := NewFrames()
	ids := make([]FrameID, 600_000)
	for i := range ids {
		ids[i] = fr.Frame(Frame{File: "a.py", Line: i%7 + 1, Func: "f"})
	}
	ids[0] = fr.Frame(Frame{File: "a.py", Line: 100, Func: "innermost"})
	ids[len(ids)-1] = fr.Frame(Frame{File: "a.py", Line: 200, Func: "outermost"})
	s := fr.Stack(ids)
	got := fr.StackAt(s)
	if len(got) != MaxStackDepth {
		t.Fatalf("%d frames kept, want %d", len(got), MaxStackDepth)
	}
	if f := fr.FrameAt(got[0]); f.Func != "innermost" {
		t.Errorf("innermost frame %+v", f)
	}
	if f := fr.FrameAt(got[len(got)-1]); f.Func != "outermost" {
		t.Errorf("outermost frame %+v", f)
	}
	mid := fr.FrameAt(got[keepInner])
	if want := ElidedFrame(600_000 - MaxStackDepth + 1); mid != want || mid.Func != "[595905 frames elided]" {
		t.Errorf("elided frame %+v, want %+v", mid, want)
	}
	if again := fr.Stack(got); again != s {
		t.Errorf("the bounded stack interned again is %d, not %d", again, s)
	}
	short := ids[:MaxStackDepth]
	if n := len(fr.StackAt(fr.Stack(short))); n != MaxStackDepth {
		t.Errorf("a stack of exactly MaxStackDepth frames kept %d", n)
	}
}
