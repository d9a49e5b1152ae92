package lsp

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// idlePoll is how often the server asks the daemon why the GPUs of its
// processes idle (idle.report over the last minute).
const idlePoll = 5 * time.Second

// followIdle keeps s.idle, the idle reports of the daemon's processes that
// have a finding, and republishes the diagnostics when they change. It runs
// until the editor closes.
func (s *Server) followIdle(ctx context.Context) {
	for {
		reports := s.askIdle(ctx)
		s.mu.Lock()
		changed := !slices.EqualFunc(s.idle, reports, sameIdle)
		s.idle = reports
		s.mu.Unlock()
		if changed {
			s.redraw() // the hints and the diagnostics
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(idlePoll):
		}
	}
}

// askIdle is the idle report of every process whose GPU idled enough for a
// finding (process.list marks them); nil without a daemon.
func (s *Server) askIdle(ctx context.Context) []api.IdleResult {
	c, err := s.link().get()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var pl api.ProcessListResult
	if c.Call(ctx, api.ProcessList, nil, &pl) != nil {
		return nil
	}
	var out []api.IdleResult
	for _, p := range pl.Processes {
		var r api.IdleResult
		if p.IdleTop != "" && c.Call(ctx, api.IdleReport, api.IdleParams{PID: p.PID}, &r) == nil && r.Headline != "" {
			out = append(out, r)
		}
	}
	return out
}

// sameIdle says two reports put the same shares on the same lines.
func sameIdle(a, b api.IdleResult) bool {
	return a.PID == b.PID && a.Headline == b.Headline && fmt.Sprint(a.Causes) == fmt.Sprint(b.Causes)
}

// idleDiagnostics puts each report's top cause on its line ("GPU idle 31%
// here: waiting for the data loader"), with the fix, and the lines the
// training thread was on as related information.
func (s *Server) idleDiagnostics(byURI map[string][]protocol.Diagnostic) {
	s.mu.Lock()
	reports := s.idle
	s.mu.Unlock()
	for _, r := range reports {
		if len(r.Causes) == 0 || r.Causes[0].Site.Line <= 0 {
			continue
		}
		c := r.Causes[0]
		local := s.paths.local(c.Site.File)
		diag := protocol.Diagnostic{Range: lineRange(c.Site.Line), Severity: protocol.DiagnosticSeverityWarning,
			Code: "gpu_idle", Source: "vramscope",
			Message: fmt.Sprintf("GPU idle %.0f%% here: %s (%.0f%% in all; pid %d, %.0f%% idle over the last %.0f s)\nFix: %s",
				100*c.Site.Share, c.Title, 100*c.Share, r.PID, 100*r.IdleShare, r.WallMS/1000, c.Fix)}
		for _, l := range c.Lines {
			if l.Line > 0 {
				diag.RelatedInformation = append(diag.RelatedInformation, protocol.DiagnosticRelatedInformation{
					Location: protocol.Location{URI: uri.File(s.paths.local(l.File)), Range: lineRange(l.Line)},
					Message:  fmt.Sprintf("GPU idle %.0f%% here", 100*l.Share)})
			}
		}
		u := string(uri.File(local))
		byURI[u] = append(byURI[u], diag)
	}
}

// idleHintShare is the least share of wall time a line's hint needs.
const idleHintShare = 0.01

// idleHints puts "GPU idle 31% here" at the end of each line of d, within
// rng, that the idle reports' top causes list (the share is of the
// report's window, summed over reports).
func (s *Server) idleHints(d *document, rng protocol.Range) []InlayHint {
	s.mu.Lock()
	reports := s.idle
	s.mu.Unlock()
	shares := map[int]float64{}
	for _, r := range reports {
		for _, c := range r.Causes {
			for _, l := range c.Lines {
				if l.Line > 0 && s.paths.same(s.paths.local(l.File), d.path) {
					shares[l.Line] += l.Share
				}
			}
		}
	}
	var out []InlayHint
	for line, share := range shares {
		if share < idleHintShare || uint32(line-1) < rng.Start.Line || uint32(line-1) > rng.End.Line {
			continue
		}
		if pos, ok := d.endOf(line); ok {
			out = append(out, InlayHint{Position: pos, Label: fmt.Sprintf("GPU idle %.0f%% here", 100*share), PaddingLeft: true,
				Tooltip: "vramscope idle: share of wall time the GPU idled while the training thread was on this line"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Position.Line < out[j].Position.Line })
	return out
}
