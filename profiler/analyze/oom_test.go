package analyze_test

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// oom_batch ran out of memory once, computing the loss inside the forward pass
// on train_gpt2.py:22, asking for the bf16->fp32 logits (1,646,821,376 bytes,
// the 'oom' trace entry's size).
func TestOOM(t *testing.T) {
	r := result(t, "oom_batch")
	f := facts(t, "oom_batch")
	if len(f.Devices[0].OOMs) != 1 || f.Devices[0].OOMs[0].Size != 1646821376 {
		t.Fatalf("fixture changed: python sees %+v", f.Devices[0].OOMs)
	}
	want := f.Devices[0].OOMs[0]
	if len(r.OOMs) != 1 {
		t.Fatalf("%d OOMs, want 1", len(r.OOMs))
	}
	o := r.OOMs[0]
	if o.Requested != want.Size {
		t.Errorf("requested %d, the oom entry asks for %d", o.Requested, want.Size)
	}
	if o.DeviceFree != want.DeviceFree {
		t.Errorf("device_free %d, the oom entry says %d", o.DeviceFree, want.DeviceFree)
	}
	if filepath.Base(o.File) != "train_gpt2.py" || o.Line != 22 || o.Function != "train_step" {
		t.Errorf("OOM at %s:%d (%s), want train_gpt2.py:22 (train_step)", o.File, o.Line, o.Function)
	}
	if want.User == nil || o.File != want.User.File || o.Line != want.User.Line {
		t.Errorf("OOM at %s:%d, first user frame of the entry %+v", o.File, o.Line, want.User)
	}
	if len(o.Frames) == 0 || filepath.Base(o.Frames[len(o.Frames)-1].File) != "loss_utils.py" {
		t.Errorf("OOM frames should end at the allocating frame (transformers/loss/loss_utils.py): %v", o.Frames)
	}
	if o.Allocated <= 0 || o.Reserved < o.Allocated {
		t.Errorf("allocated %d, reserved %d", o.Allocated, o.Reserved)
	}
	n := 0
	for _, fd := range r.Findings {
		if fd.Kind == "oom" {
			n++
			if fd.Severity != "error" || fd.File != o.File || fd.Line != o.Line || fd.Fix == "" {
				t.Errorf("oom finding %+v", fd)
			}
			if fd.Evidence.Numbers["requested"] != o.Requested {
				t.Errorf("finding's requested %d, OOM %d", fd.Evidence.Numbers["requested"], o.Requested)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d oom findings, want 1", n)
	}
}

// The snapshot was dumped by the OOM observer, at the moment of the failure:
// the state reported for the OOM is what PyTorch's own message says
// ("Of the allocated memory X is allocated by PyTorch, and Y is reserved by
// PyTorch but unallocated").
func TestOOMAgreesWithPyTorchMessage(t *testing.T) {
	r := result(t, "oom_batch")
	sc := readSidecar(t, "oom_batch")
	m := regexp.MustCompile(`Of the allocated memory (\S+ \S+) is allocated by PyTorch, and (\S+ \S+) is reserved by PyTorch but unallocated`).FindStringSubmatch(sc.OOMMessage)
	if m == nil {
		t.Fatalf("sidecar oom_message lacks the allocator figures: %q", sc.OOMMessage)
	}
	if len(r.OOMs) != 1 {
		t.Fatalf("%d OOMs", len(r.OOMs))
	}
	o := r.OOMs[0]
	if got := profiler.FormatBytes(o.Allocated); got != m[1] {
		t.Errorf("allocated at the OOM %s (%d), PyTorch said %s", got, o.Allocated, m[1])
	}
	if got := profiler.FormatBytes(o.Reserved - o.Allocated); got != m[2] {
		t.Errorf("reserved but unallocated at the OOM %s (%d), PyTorch said %s", got, o.Reserved-o.Allocated, m[2])
	}
	for _, fd := range r.Findings {
		if fd.Kind == "oom" {
			if got := profiler.FormatBytes(fd.Evidence.Numbers["reserved_unallocated"]); got != m[2] {
				t.Errorf("finding's reserved_unallocated %s, PyTorch said %s", got, m[2])
			}
		}
	}
}

// Runs that finished have no OOM and no diagnosis of trouble.
func TestHealthyRunsHaveNoFindings(t *testing.T) {
	for _, name := range []string{"gpt2_train", "llama_lora_gc", "example_train", "gpt2_12l_python_stacks"} {
		t.Run(name, func(t *testing.T) {
			r := result(t, name)
			if len(r.OOMs) != 0 {
				t.Errorf("%d OOMs", len(r.OOMs))
			}
			for _, fd := range r.Findings {
				switch fd.Kind {
				case "oom", "leak", "fragmentation":
					t.Errorf("finding %s: %s", fd.Kind, fd.Title)
				}
			}
		})
	}
}
