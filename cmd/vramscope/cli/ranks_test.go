package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
)

// rankFiles lays out the three real whatif recordings (GPT-2, batch 2, 4 and
// 8, examples/record/record_whatif.py) as the per-rank dumps of one job, the
// way people copy them from each host: rank 0 named by its meta file, the
// others by their names. They stand in for ranks; they are not one launch.
func rankFiles(t *testing.T) (dir string, files []string) {
	t.Helper()
	dir = t.TempDir()
	link := func(bs, name string) string {
		src := abs(t, need(t, filepath.Join(exampleDir, "whatif", "whatif_bs"+bs+".pickle")))
		dst := filepath.Join(dir, name)
		if err := os.Symlink(src, dst); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	files = []string{link("2", "20261201T100000.000Z-0001.pickle"), link("4", "snapshot_1.pickle"), link("8", "host-b_rank2.pickle")}
	meta := `{"id": "20261201T100000.000Z-0001", "sha256": "00", "reason": "request", "rank": 0, "device": 3, "device_by_nvml": true, "gpu_bytes": 3221225472}`
	if err := os.WriteFile(filepath.Join(dir, "20261201T100000.000Z-0001.json"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, files
}

func TestRanksFromFiles(t *testing.T) {
	dir, files := rankFiles(t)
	o := mustRun(t, append([]string{"ranks"}, files...)...)
	out := strings.ReplaceAll(o.stdout, dir, "<DIR>")
	golden.Check(t, "ranks_whatif.golden", []byte(out))
	var rv struct {
		Ranks []struct {
			Rank       int    `json:"rank"`
			Source     string `json:"source"`
			Device     int    `json:"device"`
			ByNVML     bool   `json:"device_by_nvml"`
			NonPyTorch int64  `json:"non_pytorch_bytes"`
			Reserved   int64  `json:"reserved_bytes"`
		} `json:"ranks"`
		MaxRank  int              `json:"max_rank"`
		Outliers []map[string]any `json:"outliers"`
	}
	o = mustRun(t, append([]string{"ranks", "--json"}, files[2], files[0], files[1])...)
	if err := json.Unmarshal([]byte(o.stdout), &rv); err != nil {
		t.Fatal(err)
	}
	r0 := rv.Ranks[0]
	if len(rv.Ranks) != 3 || rv.MaxRank != 2 || r0.Source != files[0] || !r0.ByNVML || r0.Device != 3 || r0.NonPyTorch != 3221225472-r0.Reserved {
		t.Errorf("ranks --json: %+v", rv)
	}
	if rv.Ranks[2].ByNVML || len(rv.Outliers) != 2 {
		t.Errorf("rank 2 (no meta): %+v; outliers %v", rv.Ranks[2], rv.Outliers)
	}
}

func TestRanksRefuses(t *testing.T) {
	_, files := rankFiles(t)
	plain := abs(t, need(t, filepath.Join(exampleDir, "whatif", "whatif_bs4.pickle")))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ranks"}, "want a group ID"},
		{[]string{"ranks", files[1], plain}, plain + ": no rank in its name"},
		{[]string{"ranks", files[1], files[1]}, "rank 1 twice"},
	} {
		o := run(c.args...)
		if o.code != 2 || !strings.Contains(o.stderr, c.want) {
			t.Errorf("vramscope %v: %v (want exit 2 and %q)", c.args, o, c.want)
		}
	}
}

// TestRanksRealJob reads the snapshots of one real launch (H200, 2026-12-01
// 23:06 UTC, examples/ranks/run_ranks.py): two torchrun ranks sharing the GPU,
// rank 1 with three times the batch. In steady training the heavier rank is
// found and the line holding the batch's activations is what differs; at
// rank 1's OOM (captured with rank 0's state at that moment) what differs is
// what the failing step held, named by the agent's tensor walk.
func TestRanksRealJob(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "examples", "ranks", "out", "snapshots")
	for _, c := range []struct {
		golden, suffix, firstLine string
		minImbalance              float64
	}{
		{"ranks_job.golden", "", "common.py", 2},
		{"ranks_job_oom.golden", "_oom", "[local] input in cross_entropy", 2.5},
	} {
		files := []string{need(t, filepath.Join(dir, "rank0"+c.suffix+".pickle")), need(t, filepath.Join(dir, "rank1"+c.suffix+".pickle"))}
		golden.Check(t, c.golden, []byte(mustRun(t, append([]string{"ranks"}, files...)...).stdout))
		var rv struct {
			MaxRank   int     `json:"max_rank"`
			Imbalance float64 `json:"imbalance"`
			Outliers  []struct {
				Rank  int `json:"rank"`
				Lines []struct {
					File      string `json:"file"`
					Function  string `json:"function"`
					PeakDelta int64  `json:"peak_delta"`
				} `json:"lines"`
			} `json:"outliers"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, append([]string{"ranks", "--json"}, files...)...).stdout), &rv); err != nil {
			t.Fatal(err)
		}
		if rv.MaxRank != 1 || rv.Imbalance < c.minImbalance || len(rv.Outliers) != 1 || rv.Outliers[0].Rank != 1 {
			t.Fatalf("%s: max rank %d, imbalance %.2f, outliers %+v", c.golden, rv.MaxRank, rv.Imbalance, rv.Outliers)
		}
		first := rv.Outliers[0].Lines[0]
		if !strings.Contains(first.File+first.Function, c.firstLine) || first.PeakDelta <= 0 {
			t.Errorf("%s: rank 1's first line %+v, want %q grown", c.golden, first, c.firstLine)
		}
	}
}
