package daemon

import (
	"fmt"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// idleFindingKind is the finding a snapshot's analysis gets when its
// process's GPU idled in the minute before the capture (vramscope idle).
const idleFindingKind = "gpu_idle"

// idleFindings is the gpu_idle finding of a stored snapshot: the idle report
// of its process over the minute before it was stored, when that names a
// cause (profiler/idle's thresholds); none without stack samples.
func (d *Daemon) idleFindings(m store.Meta) []analyze.Finding {
	if m.PID <= 0 {
		return nil
	}
	r, ok := d.idleFor(m.PID, m.Created.UnixMilli(), defaultIdleWindowMS, false)
	if !ok || r.Headline == "" || len(r.Causes) == 0 {
		return nil
	}
	return []analyze.Finding{idleFinding(&r)}
}

// idleFinding puts an idle report's top cause on its line, with the lines
// the training thread was on as evidence ("GPU idle 31% here").
func idleFinding(r *api.IdleResult) analyze.Finding {
	c := r.Causes[0]
	f := analyze.Finding{Kind: idleFindingKind, Severity: "warning", Title: r.Headline, File: c.Site.File, Line: c.Site.Line,
		Cause: c.Title, Fix: c.Fix,
		Evidence: analyze.Evidence{Numbers: map[string]int64{"idle_permille": int64(1000 * r.IdleShare),
			"cause_permille": int64(1000 * c.Share), "window_ms": int64(r.WallMS)}}}
	for _, l := range c.Lines {
		f.Evidence.Lines = append(f.Evidence.Lines, analyze.EvidenceLine{File: l.File, Line: l.Line,
			Note: fmt.Sprintf("GPU idle %.0f%% here", 100*l.Share)})
	}
	return f
}
