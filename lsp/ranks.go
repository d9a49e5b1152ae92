package lsp

// The ranks of one job in the editor (issue #17): take every rank's snapshot
// at once, list a group's ranks for the rank picker, and show one rank's
// snapshot (the hints and the flame graph follow it, as for any snapshot).

import (
	"context"
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// The commands, each with one object argument.
const (
	cmdTakeJobSnapshot = "vramscope.takeJobSnapshot" // {pid, label?} -> RankPick, showing the heaviest rank
	cmdRanks           = "vramscope.ranks"           // {group} -> RankPick
)

// RankPick is what the rank picker offers: the group's ranks, heaviest
// marked, and which one the editor shows.
type RankPick struct {
	Group     string     `json:"group"`
	Job       string     `json:"job"`
	SkewMS    float64    `json:"skew_ms"`
	Imbalance float64    `json:"imbalance"`
	Median    int        `json:"median_rank"`
	Max       int        `json:"max_rank"`
	Ranks     []RankItem `json:"ranks"`
	Shown     int        `json:"shown"` // the rank whose snapshot is open (-1: none of them)
	Failed    int        `json:"failed,omitempty"`
}

// RankItem is one rank in the picker.
type RankItem struct {
	Rank     int     `json:"rank"`
	Path     string  `json:"path"` // the snapshot file: vramscope.openSnapshot shows it
	ID       string  `json:"id"`
	Peak     int64   `json:"peak_bytes"`
	VsMedian float64 `json:"peak_vs_median"`
	Outlier  bool    `json:"outlier"`
	Device   int     `json:"device"`
	TopLine  string  `json:"top_line,omitempty"`
}

// cmdTakeJob asks the daemon for every rank of pid's launch, then opens the
// heaviest rank's snapshot: the one that runs out first.
func (s *Server) cmdTakeJob(a commandArgs) (any, error) {
	if a.PID <= 0 {
		return nil, invalid("takeJobSnapshot needs a pid")
	}
	var g api.GroupResult
	if _, err := s.daemonCallFor(3*time.Minute, api.GroupTake, api.GroupTakeParams{PID: a.PID, Label: a.Label}, &g); err != nil {
		return nil, err
	}
	pick, err := s.rankPick(g)
	if err != nil {
		return nil, err
	}
	return s.showRank(pick, pick.Max)
}

// cmdRankList lists a stored group's ranks (Shown: the one open now, if any).
func (s *Server) cmdRankList(a commandArgs) (any, error) {
	if a.Group == "" {
		return nil, invalid("ranks needs a group")
	}
	var g api.GroupResult
	if _, err := s.daemonCall(api.GroupGet, api.IDParams{ID: a.Group}, &g); err != nil {
		return nil, err
	}
	pick, err := s.rankPick(g)
	if err != nil {
		return nil, err
	}
	if l := s.shown(); l != nil {
		for _, r := range pick.Ranks {
			if r.Path == l.path {
				pick.Shown = r.Rank
			}
		}
	}
	return pick, nil
}

func (s *Server) rankPick(g api.GroupResult) (RankPick, error) {
	var rv analyze.Ranks
	if _, err := s.daemonCallFor(2*time.Minute, api.AnalysisRanks, api.RanksParams{Group: g.ID}, &rv); err != nil {
		return RankPick{}, err
	}
	pick := RankPick{Group: g.ID, Job: g.Job, SkewMS: g.SkewMS, Imbalance: rv.Imbalance, Median: rv.MedianRank,
		Max: rv.MaxRank, Shown: -1, Failed: len(g.Failed)}
	paths := map[string]string{}
	for _, sn := range g.Snapshots {
		paths[sn.ID] = sn.Path
	}
	for _, r := range rv.Ranks {
		it := RankItem{Rank: r.Rank, ID: r.Source, Path: paths[r.Source], Peak: r.Peak, VsMedian: r.VsMedian,
			Outlier: r.Outlier, Device: r.Device}
		if len(r.Top) > 0 {
			t := r.Top[0]
			it.TopLine = fmt.Sprintf("%s:%d", s.paths.local(t.File), t.Line)
		}
		pick.Ranks = append(pick.Ranks, it)
	}
	return pick, nil
}

// showRank opens rank's snapshot, as vramscope.openSnapshot would.
func (s *Server) showRank(pick RankPick, rank int) (RankPick, error) {
	for _, r := range pick.Ranks {
		if r.Rank == rank && r.Path != "" {
			if _, err := s.cmdOpen(context.Background(), r.Path, r.ID); err != nil {
				return pick, err
			}
			pick.Shown = rank
			return pick, nil
		}
	}
	return pick, failed(fmt.Sprintf("rank %d of group %s has no snapshot", rank, pick.Group))
}

// daemonCallFor is daemonCall with a longer wait (a capture, an analysis).
func (s *Server) daemonCallFor(d time.Duration, method string, params, result any) (any, error) {
	c, err := s.link().get()
	if err != nil {
		return nil, failed(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := c.Call(ctx, method, params, result); err != nil {
		return nil, failed(err.Error())
	}
	return result, nil
}
