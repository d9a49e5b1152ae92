package analyze

import (
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

func TestBackwardCall(t *testing.T) {
	anns := []profiler.Annotation{
		{Name: "train_step_3", Start: true, TimeUS: 10},
		{Name: "vramscope.backward@/w/trainer/train.py:23", Start: true, TimeUS: 20},
		{Name: "vramscope.backward@/w/trainer/train.py:23", Start: false, TimeUS: 40},
		{Name: "Optimizer.step#AdamW.step", Start: true, TimeUS: 50},
	}
	for _, tc := range []struct {
		t     int64
		file  string
		line  int
		phase string
	}{
		{15, "", 0, "train_step"},
		{25, "/w/trainer/train.py", 23, "vramscope.backward@/w/trainer/train.py:23"},
		{45, "", 0, "train_step"},
		{55, "", 0, "Optimizer.step#AdamW.step"},
	} {
		scopes := openScopes(anns, tc.t)
		f, ok := backwardCall(scopes)
		if ok != (tc.file != "") || f.File != tc.file || f.Line != tc.line {
			t.Errorf("t=%d: backward call %+v %v, want %s:%d", tc.t, f, ok, tc.file, tc.line)
		}
		if tc.file == "" && innermostPhase(scopes) != tc.phase {
			t.Errorf("t=%d: phase %q, want %q", tc.t, innermostPhase(scopes), tc.phase)
		}
	}
	for _, bad := range []string{"vramscope.backward@", "vramscope.backward@x.py", "vramscope.backward@x.py:0", "vramscope.backward@x.py:a"} {
		if f, ok := backwardCall([]string{bad}); ok {
			t.Errorf("%q parsed as %+v", bad, f)
		}
	}
}
