package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// fit: from one recorded step, the prediction at another batch and the plans
// that fit the budget, as text and as JSON; clear errors for what it cannot do.
func TestFit(t *testing.T) {
	snap := example(t, filepath.Join("whatif", "whatif_bs2"))
	o := mustRun(t, "fit", "--json", "--recorded", "2x512", "--budget", "4GiB", "--batch", "8", snap)
	var a struct {
		Target struct{ Batch, Seq int64 } `json:"target"`
		Fits   bool                       `json:"fits"`
		AsIs   struct {
			Allocated int64 `json:"peak_allocated"`
		} `json:"as_is"`
		Plans []struct {
			Kind    string `json:"kind"`
			Variant struct {
				MicroBatch   int64 `json:"micro_batch"`
				Accumulation int64 `json:"accumulation"`
			} `json:"variant"`
		} `json:"plans"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &a); err != nil {
		t.Fatal(err)
	}
	// H200, batch 8 measured 5,414,867,456 bytes (examples/snapshots/whatif/whatif.json).
	if a.Target.Batch != 8 || a.Target.Seq != 512 || a.Fits || a.AsIs.Allocated < 5.1e9 || a.AsIs.Allocated > 5.7e9 {
		t.Errorf("answer: %+v", a)
	}
	if len(a.Plans) == 0 || a.Plans[0].Variant.MicroBatch*a.Plans[0].Variant.Accumulation != 8 {
		t.Errorf("plans: %+v", a.Plans)
	}
	text := mustRun(t, "fit", "--recorded", "2x512", "--budget", "4GiB", "--batch", "8", snap).stdout
	for _, want := range []string{"does not fit", "micro-batch", "accumulation", "fragmentation margin"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range [][]string{
		{"fit", snap}, // no budget
		{"fit", "--budget", "4GiB", "--recorded", "2by512", snap}, // not BxL
		{"fit", "--budget", "4GiB", snap},                         // no names, no --recorded
		{"fit", "--budget", "4GiB", "--recorded", "2x512", snap, snap},
	} {
		if o := run(bad...); o.code != 2 || !strings.Contains(o.stderr, "fit") {
			t.Errorf("vramscope %s: %v", strings.Join(bad, " "), o)
		}
	}
}
