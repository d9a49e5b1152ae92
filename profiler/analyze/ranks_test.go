package analyze_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// whatifRanks stands in for the ranks of one job: the three real recordings
// of examples/record/record_whatif.py (GPT-2, 6 layers, batch 2, 4 and 8 on
// the H200) play ranks 0, 1 and 2 of a data-parallel job whose data loader
// gives rank 2 twice the batch of rank 1 and rank 0 half of it. They are not
// ranks of one launch; they are what such ranks hold.
func whatifRanks(t *testing.T) []analyze.RankSnapshot {
	t.Helper()
	var out []analyze.RankSnapshot
	for rank, bs := range []string{"2", "4", "8"} {
		path := filepath.Join(exampleDir, "whatif", "whatif_bs"+bs+".pickle")
		need(t, path)
		r, err := analyze.Run(path, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, analyze.RankSnapshot{Rank: rank, Source: filepath.Base(path), Result: r, Device: -1})
	}
	return out
}

func TestCompareRanksFindsTheHeavyRank(t *testing.T) {
	snaps := whatifRanks(t)
	rv, err := analyze.CompareRanks(snaps)
	if err != nil {
		t.Fatal(err)
	}
	peak := func(i int) int64 { return snaps[i].Result.Peak.Bytes }
	if rv.MedianRank != 1 || rv.MaxRank != 2 || rv.MedianPeak != peak(1) {
		t.Fatalf("median rank %d (%d B), max rank %d", rv.MedianRank, rv.MedianPeak, rv.MaxRank)
	}
	if want := float64(peak(2)) / float64(peak(1)); rv.Imbalance != want || want < 1.5 {
		t.Errorf("imbalance %.3f, want %.3f", rv.Imbalance, want)
	}
	if len(rv.Outliers) != 2 || rv.Outliers[0].Rank != 0 || rv.Outliers[1].Rank != 2 {
		t.Fatalf("outliers %+v", rv.Outliers)
	}
	heavy := rv.Outliers[1]
	if heavy.PeakDelta != peak(2)-peak(1) {
		t.Errorf("rank 2's peak delta %d, want %d", heavy.PeakDelta, peak(2)-peak(1))
	}
	// The line that makes rank 2 heavy is the one holding the batch's
	// activations: its peak grows most, by what the two analyses say it holds.
	top := heavy.Lines[0]
	want := siteAt(t, snaps[2].Result, top.File, top.Line).PeakBytes - siteAt(t, snaps[1].Result, top.File, top.Line).PeakBytes
	if top.PeakDelta != want || top.PeakDelta <= 0 || !strings.HasSuffix(top.File, "record_whatif.py") {
		t.Errorf("rank 2's first line %s:%d %+d B, want %+d", top.File, top.Line, top.PeakDelta, want)
	}
	for _, row := range rv.Ranks {
		if row.Peak != snaps[row.Rank].Result.Peak.Bytes || row.Reserved <= 0 || len(row.Top) != analyze.RankTopLines {
			t.Errorf("rank %d row %+v", row.Rank, row)
		}
		if row.NVMLSeen || row.GPUBytes != 0 {
			t.Errorf("rank %d claims NVML without it", row.Rank)
		}
	}
	b, _ := json.MarshalIndent(rv, "", " ")
	golden.Check(t, "ranks_whatif.golden", append(b, '\n'))
}

func siteAt(t *testing.T, r *analyze.Result, file string, line int) analyze.Site {
	t.Helper()
	for _, s := range r.Sites {
		if s.File == file && s.Line == line && s.Kind == "user" {
			return s
		}
	}
	return analyze.Site{}
}

// TestCompareRanksBalanced: one program's recording against another run of
// itself (the same file twice) is balanced: ratio 1, no outlier.
func TestCompareRanksBalanced(t *testing.T) {
	r := result(t, "gpt2_train")
	rv, err := analyze.CompareRanks([]analyze.RankSnapshot{
		{Rank: 1, Source: "b", Result: r, Device: 1, GPUBytes: r.Peak.Bytes * 2},
		{Rank: 0, Source: "a", Result: r, Device: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rv.Imbalance != 1 || len(rv.Outliers) != 0 || rv.Ranks[0].Rank != 0 {
		t.Errorf("balanced ranks: %+v", rv)
	}
	row := rv.Ranks[1]
	if !row.NVMLSeen || row.Device != 1 || row.NonPyTorch != row.GPUBytes-row.Reserved {
		t.Errorf("rank 1 with NVML: %+v", row)
	}
}

func TestCompareRanksRefuses(t *testing.T) {
	r := result(t, "gpt2_train")
	if _, err := analyze.CompareRanks(nil); err == nil {
		t.Error("no ranks: no error")
	}
	_, err := analyze.CompareRanks([]analyze.RankSnapshot{{Rank: 3, Source: "x.pickle", Result: r}, {Rank: 3, Source: "y.pickle", Result: r}})
	if err == nil || !strings.Contains(err.Error(), "x.pickle") || !strings.Contains(err.Error(), "y.pickle") {
		t.Errorf("rank twice: %v", err)
	}
}

func TestRankFromName(t *testing.T) {
	for name, want := range map[string]int{
		"snapshot_3.pickle": 3, "/tmp/host-a/rank12.pickle": 12, "mem_rank_0_step5.pickle": 0,
		"RANK-7.pkl": 7, "snap.4": 4, "oom-2.pickle": 2,
	} {
		if got, ok := analyze.RankFromName(name); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"whatif_bs8.pickle", "train.pickle", "gpt2.pickle"} {
		if got, ok := analyze.RankFromName(name); ok {
			t.Errorf("%s: rank %d from a name that has none", name, got)
		}
	}
}
