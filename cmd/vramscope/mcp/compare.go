package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// The comparing tools read either files (analysed here) or stored ids (the
// daemon compares them); not a mix, whose results would not be alike.
type (
	ranksIn struct {
		Group string   `json:"group,omitempty" jsonschema:"a stored group's id (every rank of one job captured together)"`
		Files []string `json:"files,omitempty" jsonschema:"instead of a group: one snapshot file per rank, the rank in each name (rank3.pickle)"`
	}
	whatIfIn struct {
		Snapshots    []sizedSnapshot `json:"snapshots" jsonschema:"two or more snapshots of one script, each with the size it ran at"`
		DeviceMemory int64           `json:"device_memory,omitempty" jsonschema:"bytes the GPU holds (default: what the daemon's NVML reports for stored snapshots)"`
	}
	sizedSnapshot struct {
		Snapshot string  `json:"snapshot" jsonschema:"a snapshot file's path or a stored id"`
		Size     float64 `json:"size" jsonschema:"the batch size or sequence length it ran at"`
	}
)

// allFiles says whether every source is a file, and refuses a mix.
func allFiles(srcs ...string) (bool, error) {
	files := 0
	for _, s := range srcs {
		if s == "" {
			return false, errors.New("a snapshot is missing: name a file path or a stored id")
		}
		if isFile(s) {
			files++
		}
	}
	if files != 0 && files != len(srcs) {
		return false, errors.New("compare files with files and stored ids with stored ids (import a file into the daemon with vramscope snap or store it first)")
	}
	return files == len(srcs), nil
}

func (b *backend) diff(ctx context.Context, in diffIn) (string, error) {
	files, err := allFiles(in.Before, in.After)
	if err != nil {
		return "", err
	}
	var d *analyze.Diff
	if files {
		before, err := b.analysis(ctx, in.Before)
		if err != nil {
			return "", err
		}
		after, err := b.analysis(ctx, in.After)
		if err != nil {
			return "", err
		}
		d = analyze.Compare(before, after)
	} else {
		d = &analyze.Diff{}
		if err := b.call(ctx, api.AnalysisDiff, api.DiffParams{A: in.Before, B: in.After}, d); err != nil {
			return "", err
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Peak %s -> %s (%s); %d new lines, %d gone.\nLines whose memory at the peak changed most:\n",
		fb(d.PeakA), fb(d.PeakB), signed(d.PeakDelta), d.New, d.Gone)
	top := topOf(in.Top, 10)
	for i, s := range d.Sites {
		if i >= top || s.Status == "same" {
			break
		}
		fmt.Fprintf(&sb, "%d. %s (%s -> %s) %s at %s\n", i+1, signed(s.PeakDelta), fb(s.PeakBefore), fb(s.PeakAfter), s.Status, where(s.File, s.Line, s.Function))
	}
	return cut(sb.String()), nil
}

func signed(n int64) string {
	if n < 0 {
		return "-" + fb(-n)
	}
	return "+" + fb(n)
}

func (b *backend) ranks(ctx context.Context, in ranksIn) (string, error) {
	var rv *analyze.Ranks
	switch {
	case in.Group != "" && len(in.Files) == 0:
		rv = &analyze.Ranks{}
		if err := b.call(ctx, api.AnalysisRanks, api.RanksParams{Group: in.Group}, rv); err != nil {
			return "", err
		}
	case in.Group == "" && len(in.Files) > 0:
		var err error
		if rv, err = b.ranksOfFiles(ctx, in.Files); err != nil {
			return "", err
		}
	default:
		return "", errors.New("give either group (a stored group's id) or files (one snapshot file per rank)")
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d ranks; median peak %s (rank %d); imbalance %.2f (max/median peak, rank %d).\n",
		len(rv.Ranks), fb(rv.MedianPeak), rv.MedianRank, rv.Imbalance, rv.MaxRank)
	for _, r := range rv.Ranks {
		mark := ""
		if r.Outlier {
			mark = " OUTLIER"
		}
		fmt.Fprintf(&sb, "- rank %d: peak %s (%.2fx median), reserved %s%s\n", r.Rank, fb(r.Peak), r.VsMedian, fb(r.Reserved), mark)
	}
	for _, o := range rv.Outliers {
		fmt.Fprintf(&sb, "Rank %d against the median rank (%s):\n", o.Rank, signed(o.PeakDelta))
		for i, s := range o.Lines {
			if i >= 5 {
				break
			}
			fmt.Fprintf(&sb, "  %s at %s\n", signed(s.PeakDelta), where(s.File, s.Line, s.Function))
		}
	}
	return cut(sb.String()), nil
}

func (b *backend) ranksOfFiles(ctx context.Context, files []string) (*analyze.Ranks, error) {
	var snaps []analyze.RankSnapshot
	for _, f := range files {
		rank, ok := analyze.RankFromName(f)
		if !ok {
			return nil, fmt.Errorf("%s: no rank in its name (rank3.pickle, snapshot_3.pickle)", f)
		}
		res, err := b.analysis(ctx, f)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, analyze.RankSnapshot{Rank: rank, Source: f, Result: res, Device: -1})
	}
	return analyze.CompareRanks(snaps)
}

func (b *backend) whatIf(ctx context.Context, in whatIfIn) (string, error) {
	srcs := make([]string, len(in.Snapshots))
	for i, s := range in.Snapshots {
		srcs[i] = s.Snapshot
	}
	files, err := allFiles(srcs...)
	if err != nil {
		return "", err
	}
	var w *analyze.WhatIf
	if files {
		var pts []analyze.WhatIfPoint
		for _, s := range in.Snapshots {
			res, err := b.analysis(ctx, s.Snapshot)
			if err != nil {
				return "", err
			}
			pts = append(pts, analyze.WhatIfPointOf(res, s.Size))
		}
		if w, err = analyze.FitWhatIf(pts, analyze.WhatIfOptions{DeviceMemory: in.DeviceMemory, Overhead: 1 << 30}); err != nil {
			return "", err
		}
	} else {
		p := api.WhatIfParams{DeviceMemory: in.DeviceMemory}
		for _, s := range in.Snapshots {
			p.Snapshots = append(p.Snapshots, api.WhatIfSnapshot{ID: s.Snapshot, Size: s.Size})
		}
		w = &analyze.WhatIf{}
		if err := b.call(ctx, api.AnalysisWhatIf, p, w); err != nil {
			return "", err
		}
	}
	return writeWhatIf(w), nil
}

func writeWhatIf(w *analyze.WhatIf) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Peak against size (%s fit over %d snapshots; leave-one-out error %.1f%%):\n", w.Model, len(w.Points), 100*w.Allocated.LOOError)
	for _, p := range w.Points {
		fmt.Fprintf(&sb, "- size %g: peak %s allocated, %s reserved\n", p.Size, fb(p.Allocated), fb(p.Reserved))
	}
	if w.DeviceMemory > 0 {
		fmt.Fprintf(&sb, "Largest size that fits %s (with %s outside the allocator): %d.\n", fb(w.DeviceMemory), fb(w.Overhead), w.MaxSize)
	} else {
		sb.WriteString("The device's memory is unknown: give device_memory to get the largest size that fits.\n")
	}
	for _, n := range w.Notes {
		fmt.Fprintf(&sb, "Note: %s\n", n)
	}
	return sb.String()
}
