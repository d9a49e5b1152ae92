package analyze

import (
	"strings"
	"testing"
)

// The agent snapshots were recorded on an H200 by make gpu-e2e: GPT-2 124M
// under `vramscope run` (examples/e2e/train.py), taken through the daemon, and
// an OOM captured by the agent's observer (examples/e2e/oom.py).
const agentSnaps = "../../examples/snapshots/"

// TestBackwardLineGetsItsPass: the backward pass runs on autograd's thread
// with no Python stack; inside the agent's vramscope.backward@ scope it is
// attributed to the loss.backward() line (train.py:29), not to a phase.
func TestBackwardLineGetsItsPass(t *testing.T) {
	r, err := Run(agentSnaps+"agent_gpt2.pickle", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var backward *Site
	for i, s := range r.Sites {
		if strings.HasSuffix(s.File, "examples/e2e/train.py") && s.Line == 29 {
			backward = &r.Sites[i]
		}
		if s.Kind == "user" && strings.Contains(s.File, "/vramscope/_") {
			t.Errorf("the agent's own frame %s:%d is a user site", s.File, s.Line)
		}
	}
	if backward == nil || backward.Kind != "user" || backward.Function != "step" {
		t.Fatalf("no user site at train.py:29 (loss.backward()): %+v", backward)
	}
	if backward.PeakShare < 0.10 {
		t.Errorf("backward line holds %.1f%% of the peak; the backward pass should be there", 100*backward.PeakShare)
	}
	for _, s := range r.Sites {
		if s.Kind == "phase" && s.PeakBytes > r.Peak.Bytes/100 {
			t.Errorf("phase %q still holds %d bytes at the peak", s.Function, s.PeakBytes)
		}
	}
	if r.Coverage.UserLine < r.Peak.Bytes*99/100 {
		t.Errorf("user lines hold %d of %d peak bytes", r.Coverage.UserLine, r.Peak.Bytes)
	}
}

func TestAgentOOMSnapshot(t *testing.T) {
	r, err := Run(agentSnaps+"agent_oom.pickle", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.OOMs) != 1 {
		t.Fatalf("%d OOM events, want the one the observer captured", len(r.OOMs))
	}
	o := r.OOMs[0]
	if !strings.HasSuffix(o.File, "examples/e2e/train.py") || o.Line != 28 || o.Requested <= 1<<30 {
		t.Errorf("OOM at %s:%d asking %d bytes; want the forward line train.py:28 asking > 1 GiB (the logits)", o.File, o.Line, o.Requested)
	}
	found := false
	for _, f := range r.Findings {
		found = found || f.Kind == "oom"
	}
	if !found {
		t.Error("no oom finding")
	}
}
