package profiler

import (
	"math"
	"testing"
)

func TestIsUserFile(t *testing.T) {
	for _, c := range []struct {
		file string
		want bool
	}{
		// The user's own scripts, wherever they ran.
		{"/workspace/trainer/train_gpt2.py", true},
		{"/home/alice/proj/model.py", true},
		{"train.py", true},
		{"/work/main/examples/record/record_examples.py", true},
		{`C:\Users\alice\proj\train.py`, true},
		// vramscope's agent, installed or from a checkout, is not the user's code.
		{"/work/main/jupyter/vramscope/_torch.py", false},
		{"/home/alice/vramscope/train.py", true},
		// Notebooks.
		{"/tmp/ipykernel_12345/3456789012.py", true},
		{"<ipython-input-3-1a2b3c4d5e6f>", true},
		// Installed libraries and PyTorch itself.
		{"/usr/local/lib/python3.12/site-packages/torch/nn/modules/module.py", false},
		{"/usr/local/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py", false},
		{"/usr/lib/python3/dist-packages/numpy/core/numeric.py", false},
		{"/home/alice/.venv/lib/python3.11/site-packages/peft/tuners/lora/layer.py", false},
		{"/opt/conda/lib/python3.10/contextlib.py", false},
		{"/root/.pyenv/versions/3.11.7/lib/python3.11/runpy.py", false},
		{"/home/alice/src/pytorch/torch/utils/checkpoint.py", false}, // a PyTorch checkout
		{"/usr/lib/python3/dist-packages/_pytest/python.py", false},
		{`C:\Python312\Lib\site-packages\torch\nn\modules\module.py`, false},
		{`C:\Users\alice\.venv\Lib\site-packages\transformers\trainer.py`, false},
		// Not Python source at all.
		{"", false},
		{"??", false},
		{"<frozen runpy>", false},
		{"<string>", false},
		{"/home/alice/proj/kernel.cu", false},
		{"/pytorch/c10/cuda/CUDACachingAllocator.cpp", false},
	} {
		if got := IsUserFile(c.file); got != c.want {
			t.Errorf("IsUserFile(%q) = %v, want %v", c.file, got, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{32 << 10, "32.00 KiB"},
		{1 << 20, "1.00 MiB"},
		{419588096, "400.15 MiB"},    // PyTorch's OOM message: reserved but unallocated
		{1646821376, "1.53 GiB"},     // the oom_batch request
		{5517449216, "5.14 GiB"},     // allocated at oom_batch's OOM
		{6442450944, "6.00 GiB"},     // oom_batch's cap
		{143771 << 20, "140.40 GiB"}, // an H200
		{1 << 40, "1.00 TiB"},
		{3 << 50, "3072.00 TiB"},
		{-2048, "-2.00 KiB"},
		{-5, "-5 B"},
		{math.MaxInt64, "8388608.00 TiB"},
	} {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

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
