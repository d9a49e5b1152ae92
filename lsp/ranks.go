package lsp

// The ranks of one job in the editor (issue #17): take every rank's snapshot
// at once, list a group's ranks for the rank picker, and show one rank's
// snapshot (the hints and the flame graph follow it, as for any snapshot).

import (
	"context"
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// cmdTakeJob asks the daemon for every rank of pid's launch, then opens the
// heaviest rank's snapshot: the one that runs out first.
func (s *Server) cmdTakeJob(_ context.Context, a command.TakeArgs) (command.RankPick, error) {
	if a.PID <= 0 {
		return command.RankPick{}, invalid("takeJobSnapshot needs a pid")
	}
	g, err := daemonGet[api.GroupResult](s, 3*time.Minute, api.GroupTake, api.GroupTakeParams{PID: a.PID, Label: a.Label})
	if err != nil {
		return command.RankPick{}, err
	}
	pick, err := s.rankPick(g)
	if err != nil {
		return command.RankPick{}, err
	}
	return s.showRank(pick, pick.Max)
}

// cmdRankList lists a stored group's ranks (Shown: the one open now, if any).
func (s *Server) cmdRankList(_ context.Context, a command.RanksArgs) (command.RankPick, error) {
	if a.Group == "" {
		return command.RankPick{}, invalid("ranks needs a group")
	}
	g, err := daemonGet[api.GroupResult](s, 30*time.Second, api.GroupGet, api.IDParams{ID: a.Group})
	if err != nil {
		return command.RankPick{}, err
	}
	pick, err := s.rankPick(g)
	if err != nil {
		return command.RankPick{}, err
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

func (s *Server) rankPick(g api.GroupResult) (command.RankPick, error) {
	rv, err := daemonGet[analyze.Ranks](s, 2*time.Minute, api.AnalysisRanks, api.RanksParams{Group: g.ID})
	if err != nil {
		return command.RankPick{}, err
	}
	pick := command.RankPick{Group: g.ID, Job: g.Job, SkewMS: g.SkewMS, Imbalance: rv.Imbalance, Median: rv.MedianRank,
		Max: rv.MaxRank, Shown: -1, Failed: len(g.Failed)}
	paths := map[string]string{}
	for _, sn := range g.Snapshots {
		paths[sn.ID] = sn.Path
	}
	for _, r := range rv.Ranks {
		it := command.RankItem{Rank: r.Rank, ID: r.Source, Path: paths[r.Source], Peak: r.Peak, VsMedian: r.VsMedian,
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
func (s *Server) showRank(pick command.RankPick, rank int) (command.RankPick, error) {
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
