package analyze_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// TestReportsFitTheirTypes decodes the reports of real snapshots into the
// types the wire contract declares (analyze.Report, analyze.CompareReport),
// refusing any key the types lack: the generated TypeScript and Python types
// describe what the pages draw.
func TestReportsFitTheirTypes(t *testing.T) {
	a, b := result(t, "example_train"), result(t, "leak_steps")
	rep, err := b.Report()
	if err != nil {
		t.Fatal(err)
	}
	diff, err := analyze.DiffReport(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		into any
	}{{"Report", rep, &analyze.Report{}}, {"DiffReport", diff, &analyze.CompareReport{}}} {
		dec := json.NewDecoder(bytes.NewReader(c.data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c.into); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	var cr analyze.CompareReport
	if err := json.Unmarshal(diff, &cr); err != nil || cr.Before.File != a.File || cr.Device == nil || cr.Diff.After == "" {
		t.Errorf("DiffReport: before %q (want %q), device %v, diff after %q: %v", cr.Before.File, a.File, cr.Device, cr.Diff.After, err)
	}
}
