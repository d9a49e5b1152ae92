package lsp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/lsp/command"
)

// vramscope/report answers the linked report of the snapshot shown, its files
// mapped to local ones as the flame tree's are, so the webview's moments and
// findings select the tree's frames.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	local := filepath.Join(dir, "mine", "train_gpt2.py")
	os.MkdirAll(filepath.Dir(local), 0o755)
	os.WriteFile(local, src, 0o644)
	c := start(t, Config{}, map[string]any{"snapshot": filepath.Join(fixtures, "snapshots/gpt2_train.pickle"),
		"pathMap": []string{"/workspace/trainer=" + filepath.Dir(local)}})
	c.waitShown("gpt2_train.pickle")
	var rep struct {
		Device struct {
			Timeline struct {
				Points []any `json:"points"`
			} `json:"timeline"`
		} `json:"device"`
		Sites []struct {
			File string `json:"file"`
		} `json:"sites"`
		Moments struct {
			Frames []struct {
				F string `json:"f"`
			} `json:"frames"`
			Buckets [][]int64 `json:"buckets"`
		} `json:"moments"`
	}
	c.call(command.Report, map[string]any{}, &rep)
	if len(rep.Device.Timeline.Points) == 0 || len(rep.Moments.Buckets) == 0 {
		t.Fatalf("report without a timeline or moments: %d points, %d buckets", len(rep.Device.Timeline.Points), len(rep.Moments.Buckets))
	}
	if len(rep.Sites) == 0 || rep.Sites[0].File != local {
		t.Errorf("top line in %v, want %s", rep.Sites, local)
	}
	mapped := false
	for _, f := range rep.Moments.Frames {
		if filepath.Dir(f.F) == "/workspace/trainer" {
			t.Errorf("moment frame %s not mapped", f.F)
		}
		mapped = mapped || f.F == local
	}
	if !mapped {
		t.Errorf("no moment frame in %s", local)
	}
}

// vramscope/diffReport answers the after side's report with the before
// side's timeline and the per-line diff, files mapped to local ones.
func TestDiffReportRequest(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	local := filepath.Join(dir, "mine", "train_gpt2.py")
	os.MkdirAll(filepath.Dir(local), 0o755)
	os.WriteFile(local, src, 0o644)
	c := start(t, Config{}, map[string]any{"pathMap": []string{"/workspace/trainer=" + filepath.Dir(local)}})
	snap := filepath.Join(fixtures, "snapshots/gpt2_train.pickle")
	var rep struct {
		Before struct {
			Device struct {
				Timeline struct {
					Points []any `json:"points"`
				} `json:"timeline"`
			} `json:"device"`
		} `json:"before"`
		Diff struct {
			Sites []struct {
				File   string `json:"file"`
				Status string `json:"status"`
			} `json:"sites"`
		} `json:"diff"`
	}
	c.call(command.DiffReport, map[string]any{"a": snap, "b": snap}, &rep)
	if len(rep.Before.Device.Timeline.Points) == 0 || len(rep.Diff.Sites) == 0 {
		t.Fatalf("diff report: %d before points, %d sites", len(rep.Before.Device.Timeline.Points), len(rep.Diff.Sites))
	}
	found := false
	for _, s := range rep.Diff.Sites {
		if s.Status != "same" {
			t.Errorf("a snapshot against itself: %s %s", s.File, s.Status)
		}
		found = found || s.File == local
	}
	if !found {
		t.Errorf("no diff line in %s", local)
	}
}
