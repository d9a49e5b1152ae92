package analyze_test

import (
	"encoding/json"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// TestReportFields: the report carries the peak device's timeline, the
// findings and moments whose frames name the peak's top line.
func TestReportFields(t *testing.T) {
	r := result(t, "gpt2_train")
	b, err := r.Report()
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Device struct {
			Timeline struct {
				Points []json.RawMessage `json:"points"`
			} `json:"timeline"`
		} `json:"device"`
		Findings []json.RawMessage `json:"findings"`
		Sites    []struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"sites"`
		Moments struct {
			Frames []struct {
				F string `json:"f"`
				L int    `json:"l"`
			} `json:"frames"`
			Sites []int `json:"sites"`
		} `json:"moments"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Device.Timeline.Points) == 0 || len(rep.Sites) == 0 || len(rep.Findings) != len(r.Findings) {
		t.Fatalf("report: %d points, %d sites, %d findings", len(rep.Device.Timeline.Points), len(rep.Sites), len(rep.Findings))
	}
	top := rep.Sites[0]
	for _, s := range rep.Moments.Sites {
		if s >= 0 && rep.Moments.Frames[s].F == top.File && rep.Moments.Frames[s].L == top.Line {
			return
		}
	}
	t.Errorf("no moment origin counts for the top line %s:%d", top.File, top.Line)
}

// TestDiffReport: the diff's report is the after side's, with the before
// side's timeline and the per-line diff beside it.
func TestDiffReport(t *testing.T) {
	a, b := result(t, "gpt2_train"), result(t, "oom_batch")
	raw, err := analyze.DiffReport(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		File   string `json:"file"`
		Before struct {
			File   string `json:"file"`
			Device struct {
				Timeline struct {
					Points []json.RawMessage `json:"points"`
				} `json:"timeline"`
			} `json:"device"`
		} `json:"before"`
		Diff analyze.Diff `json:"diff"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.File != b.File || rep.Before.File != a.File {
		t.Errorf("sides: after %s, before %s", rep.File, rep.Before.File)
	}
	if len(rep.Before.Device.Timeline.Points) != len(a.Devices[0].Timeline.Points) {
		t.Errorf("before timeline: %d points, want %d", len(rep.Before.Device.Timeline.Points), len(a.Devices[0].Timeline.Points))
	}
	if rep.Diff.PeakDelta != b.Peak.Bytes-a.Peak.Bytes || len(rep.Diff.Sites) == 0 {
		t.Errorf("diff: %+v", rep.Diff)
	}
}
