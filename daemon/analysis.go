package daemon

// analysis.go: the analysis.* handlers, over the cache of daemon/capture.

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

// result looks up a snapshot and its analysis for an analysis.* request.
func (s *session) result(ctx context.Context, id string) (*analyze.Result, error) {
	if _, err := s.d.lookup(id); err != nil {
		return nil, err
	}
	r, err := s.d.analyses.GetContext(ctx, id)
	if ctx.Err() != nil {
		return nil, ctx.Err() // nobody reads the answer (the request was cancelled, or its client went)
	}
	if err != nil {
		return nil, fail(errBadSnapshot, "%v", err)
	}
	return r, nil
}

func (s *session) analysisSummary(ctx context.Context, p api.IDParams) (precomputed[analyze.Result], error) {
	if _, err := s.d.lookup(p.ID); err != nil {
		return nil, err
	}
	if !s.d.analyses.Cached(p.ID) {
		if b, err := s.d.store.ReadCache(p.ID, capture.SummaryCache); err == nil && json.Valid(b) {
			return precomputed[analyze.Result](b), nil
		}
	}
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fail(errInternal, "%v", err)
	}
	return precomputed[analyze.Result](b), nil
}

func (s *session) analysisSites(ctx context.Context, p api.SitesParams) (api.SitesResult, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return api.SitesResult{}, err
	}
	res := api.SitesResult{File: p.File, PeakBytes: r.Peak.Bytes, Sites: []analyze.Site{}}
	for _, site := range r.Sites {
		if sameFile(site.File, p.File) {
			res.Sites = append(res.Sites, site)
		}
	}
	return res, nil
}

// sameFile matches a recorded path with a requested one exactly or, when the
// two are in different trees (a container, a remote box), by their common
// trailing components: at least the base name and its directory.
func sameFile(recorded, want string) bool {
	if recorded == "" || want == "" {
		return false
	}
	if recorded == want {
		return true
	}
	n := profiler.CommonSuffix(recorded, want)
	single := !strings.Contains(filepath.ToSlash(recorded), "/") || !strings.Contains(filepath.ToSlash(want), "/")
	return n >= 2 || (n == 1 && single)
}

func (s *session) analysisFlame(ctx context.Context, p api.FlameParams) (*flame.Tree, error) {
	w := flame.WeightPeak
	if p.Weight != "" {
		var ok bool
		if w, ok = flame.ParseWeight(p.Weight); !ok {
			return nil, fail(errInvalid, "unknown weight %q (peak, alloc or current)", p.Weight)
		}
	}
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return r.Flame(analyze.FlameOptions{Weight: w, KeepWrappers: p.KeepWrappers}), nil
}

// analysisReport answers Result.Report: what report.js draws beside the flame tree.
func (s *session) analysisReport(ctx context.Context, p api.IDParams) (analyze.Report, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return analyze.Report{}, err
	}
	return r.ReportData(), nil
}

func (s *session) analysisTimeline(ctx context.Context, p api.TimelineParams) (analyze.Timeline, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return analyze.Timeline{}, err
	}
	for _, d := range r.Devices {
		if d.Device == p.Device {
			return d.Timeline, nil
		}
	}
	return analyze.Timeline{}, fail(errNotFound, "snapshot %s has no trace for device %d", p.ID, p.Device)
}

func (s *session) analysisFindings(ctx context.Context, p api.IDParams) ([]analyze.Finding, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if r.Findings == nil {
		return []analyze.Finding{}, nil
	}
	return r.Findings, nil
}

func (s *session) analysisDiff(ctx context.Context, p api.DiffParams) (*analyze.Diff, error) {
	a, err := s.result(ctx, p.A)
	if err != nil {
		return nil, err
	}
	b, err := s.result(ctx, p.B)
	if err != nil {
		return nil, err
	}
	return analyze.Compare(a, b), nil
}

func (s *session) analysisWhatIf(ctx context.Context, p api.WhatIfParams) (*analyze.WhatIf, error) {
	if len(p.Snapshots) < 2 {
		return nil, fail(errInvalid, "analysis.whatif wants two or more snapshots, each with its size")
	}
	opt := analyze.WhatIfOptions{Model: p.Model, DeviceMemory: p.DeviceMemory, Overhead: 1 << 30, Predict: p.Predict}
	if p.Overhead != nil {
		opt.Overhead = *p.Overhead
	}
	var pts []analyze.WhatIfPoint
	for _, sn := range p.Snapshots {
		r, err := s.result(ctx, sn.ID)
		if err != nil {
			return nil, err
		}
		pts = append(pts, analyze.WhatIfPointOf(r, sn.Size))
	}
	if opt.DeviceMemory == 0 {
		if m, err := s.d.lookup(p.Snapshots[0].ID); err == nil {
			opt.DeviceMemory = s.d.deviceTotal(m.Device)
		}
	}
	w, err := analyze.FitWhatIf(pts, opt)
	if err != nil {
		return nil, fail(errInvalid, "%v", err)
	}
	return w, nil
}
