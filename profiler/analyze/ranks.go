package analyze

// The rank view: one snapshot per rank of a distributed job, side by side.
// The ranks of a data-parallel job run the same program on the same model, so
// they should hold about the same memory; the rank that runs out first is the
// one that holds more, and the lines where it holds more say why (a larger
// shard of the batch, a rank that keeps extra state, a leak on one rank).

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
)

// OutlierTolerance is how far a rank's peak may stray from the median rank's
// (as a share of it) before the rank counts as an outlier. Ranks of one job
// differ by a few percent (uneven last batches, rank 0's logging), so 10%
// catches a real imbalance without flagging that noise.
const OutlierTolerance = 0.10

// RankTopLines and RankDiffLines bound the lines a rank row and an outlier's
// diff list.
const (
	RankTopLines  = 5
	RankDiffLines = 10
)

// RankSnapshot is one rank's analysis and what the caller knows beside it.
type RankSnapshot struct {
	Rank   int
	Source string // the file or the stored snapshot's ID
	Result *Result
	// Device is the GPU by NVML's index where the daemon knew it (-1: not
	// known; the row then shows the device of the snapshot's peak, CUDA's
	// numbering in the process).
	Device int
	// GPUBytes is NVML's memory of the process when the snapshot was taken (0:
	// NVML did not see it).
	GPUBytes int64
}

// RankRow is one rank in the table.
type RankRow struct {
	Rank     int    `json:"rank"`
	Source   string `json:"source"`
	Device   int    `json:"device"`
	NVMLSeen bool   `json:"device_by_nvml"` // Device is NVML's index (else CUDA's, in the process)
	Peak     int64  `json:"peak_bytes"`
	// Reserved is what the allocator held from the driver when the snapshot was
	// taken (its segments), on the peak's device.
	Reserved int64 `json:"reserved_bytes"`
	// GPUBytes is NVML's view of the process; NonPyTorch what NVML saw beyond
	// the allocator's reserve (CUDA context, NCCL buffers, cuBLAS workspaces).
	// Both are absent without NVML.
	GPUBytes   int64      `json:"gpu_bytes,omitempty"`
	NonPyTorch int64      `json:"non_pytorch_bytes,omitempty"`
	Categories []Category `json:"categories"`
	Top        []Site     `json:"top_lines"`
	// VsMedian is this rank's peak over the median rank's.
	VsMedian float64 `json:"peak_vs_median"`
	Outlier  bool    `json:"outlier"`
	// OOMs counts the out-of-memory events in the rank's trace; OOM is the
	// first of them (absent when the rank never ran out).
	OOMs int  `json:"ooms"`
	OOM  *OOM `json:"oom,omitempty"`
}

// RankOutlier is a rank whose peak strays from the median rank's, and the
// lines that make the difference (the diff from the median rank to it).
type RankOutlier struct {
	Rank      int         `json:"rank"`
	PeakDelta int64       `json:"peak_delta"`
	Lines     []SiteDelta `json:"lines"`
}

// Ranks is the rank view of one job.
type Ranks struct {
	Ranks      []RankRow `json:"ranks"` // by rank
	MedianRank int       `json:"median_rank"`
	MedianPeak int64     `json:"median_peak_bytes"`
	MaxRank    int       `json:"max_rank"`
	// Imbalance is the largest peak over the median peak (1: balanced).
	Imbalance float64       `json:"imbalance"`
	Tolerance float64       `json:"outlier_tolerance"`
	Outliers  []RankOutlier `json:"outliers"`
	// OOMRanks are the ranks that ran out of memory (often one, whose OOM
	// made the others' snapshots).
	OOMRanks []int `json:"oom_ranks"`
}

// CompareRanks builds the rank view. The median rank is the lower middle of
// the ranks ordered by peak (with two ranks, the lighter one: the heavier is
// then the one that stands out). Every rank must be there once.
func CompareRanks(snaps []RankSnapshot) (*Ranks, error) {
	if len(snaps) == 0 {
		return nil, fmt.Errorf("no ranks to compare")
	}
	byRank := append([]RankSnapshot(nil), snaps...)
	sort.SliceStable(byRank, func(i, j int) bool { return byRank[i].Rank < byRank[j].Rank })
	for i := 1; i < len(byRank); i++ {
		if byRank[i].Rank == byRank[i-1].Rank {
			return nil, fmt.Errorf("rank %d twice: %s and %s", byRank[i].Rank, byRank[i-1].Source, byRank[i].Source)
		}
	}
	median, max := medianAndMax(byRank)
	out := &Ranks{MedianRank: median.Rank, MedianPeak: median.Result.Peak.Bytes, MaxRank: max.Rank,
		Tolerance: OutlierTolerance, Outliers: []RankOutlier{}, OOMRanks: []int{}}
	out.Imbalance = ratio(max.Result.Peak.Bytes, out.MedianPeak)
	for _, s := range byRank {
		row := rankRow(s, out.MedianPeak)
		out.Ranks = append(out.Ranks, row)
		if row.OOMs > 0 {
			out.OOMRanks = append(out.OOMRanks, row.Rank)
		}
		if row.Outlier {
			out.Outliers = append(out.Outliers, outlier(median.Result, s))
		}
	}
	return out, nil
}

// medianAndMax picks the median rank and the heaviest one by peak.
func medianAndMax(snaps []RankSnapshot) (median, max RankSnapshot) {
	byPeak := append([]RankSnapshot(nil), snaps...)
	sort.SliceStable(byPeak, func(i, j int) bool { return byPeak[i].Result.Peak.Bytes < byPeak[j].Result.Peak.Bytes })
	return byPeak[(len(byPeak)-1)/2], byPeak[len(byPeak)-1]
}

func rankRow(s RankSnapshot, medianPeak int64) RankRow {
	r := s.Result
	row := RankRow{Rank: s.Rank, Source: s.Source, Device: s.Device, NVMLSeen: s.Device >= 0, Peak: r.Peak.Bytes,
		Categories: r.Categories, VsMedian: ratio(r.Peak.Bytes, medianPeak)}
	if row.Categories == nil {
		row.Categories = []Category{}
	}
	for _, d := range r.Devices {
		if d.Device == r.Peak.Device {
			row.Reserved = d.Allocator.Reserved
		}
	}
	if !row.NVMLSeen {
		row.Device = r.Peak.Device
	}
	if s.GPUBytes > 0 {
		row.GPUBytes = s.GPUBytes
		row.NonPyTorch = max(0, s.GPUBytes-row.Reserved)
	}
	row.Top = append([]Site{}, r.Sites[:min(RankTopLines, len(r.Sites))]...)
	row.Outlier = row.VsMedian > 1+OutlierTolerance || row.VsMedian < 1-OutlierTolerance
	if row.OOMs = len(r.OOMs); row.OOMs > 0 {
		row.OOM = &r.OOMs[0]
	}
	return row
}

// outlier is the per-line diff from the median rank to rank s, the lines
// that changed only.
func outlier(median *Result, s RankSnapshot) RankOutlier {
	d := Compare(median, s.Result)
	o := RankOutlier{Rank: s.Rank, PeakDelta: d.PeakDelta, Lines: []SiteDelta{}}
	for _, l := range d.Sites {
		if l.Status == "same" || l.PeakDelta == 0 {
			continue
		}
		o.Lines = append(o.Lines, l)
		if len(o.Lines) == RankDiffLines {
			break
		}
	}
	return o
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// rankInName finds a rank in a file name the way people name per-rank dumps:
// "rank3", "rank_3", "rank-3" anywhere, else a trailing number
// ("snapshot_3.pickle", "mem-3.pkl").
var (
	rankWord  = regexp.MustCompile(`(?i)rank[_-]?([0-9]+)`)
	rankTrail = regexp.MustCompile(`[_.-]([0-9]+)$`)
)

// RankFromName is the rank a file's name gives, if any.
func RankFromName(path string) (int, bool) {
	base := filepath.Base(path)
	if m := rankWord.FindStringSubmatch(base); m != nil {
		return atoiRank(m[1])
	}
	stem := base
	for ext := filepath.Ext(stem); ext != "" && len(ext) < 8; ext = filepath.Ext(stem) {
		if _, err := strconv.Atoi(ext[1:]); err == nil {
			break // "snap.3": the number is the rank, not an extension
		}
		stem = stem[:len(stem)-len(ext)]
	}
	if m := rankTrail.FindStringSubmatch(stem); m != nil {
		return atoiRank(m[1])
	}
	return 0, false
}

func atoiRank(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n < 1<<20
}
