package cli_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/vramscope/vramscope/internal/synth"
)

// analyze's text says how many annotated steps ended before the trace's
// first event, and counts only the steps inside it.
func TestAnalyzeSaysStepsBeforeTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.pickle")
	if _, err := synth.GenerateFile(path, fixture(t, "gpt2_train"),
		synth.Options{Entries: 200_000, MaxAnnotatedReps: 1 << 20, AnnotationsBeforeTrace: true}); err != nil {
		t.Fatal(err)
	}
	o := mustRun(t, "analyze", path)
	m := regexp.MustCompile(`Steps \((\d+), from annotations; (\d+) more ended before the trace's first event, not counted: their memory was not recorded\)`).FindStringSubmatch(o.stdout)
	if m == nil {
		t.Fatalf("no steps line saying what lies before the trace:\n%s", o.stdout)
	}
	in, before := atoi(t, m[1]), atoi(t, m[2])
	if in == 0 || before == 0 {
		t.Errorf("%d steps inside, %d before", in, before)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
