package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/vramscope/vramscope/daemon/api"
)

// writeIdle prints an idle report: the idle share, then each cause with its
// line, where the training thread was, and the fix.
func writeIdle(w io.Writer, r *api.IdleResult) {
	fmt.Fprintf(w, "pid %d, GPU %d: idle %.0f%% of %.1f s (%d samples of the training thread, every %.0f ms", r.PID, r.Device,
		100*r.IdleShare, r.WallMS/1000, r.Samples, r.PeriodMS)
	if r.Dropped > 0 {
		fmt.Fprintf(w, ", %d dropped", r.Dropped)
	}
	if r.SamplerCPUMS > 0 {
		fmt.Fprintf(w, "; the sampler's CPU so far %.0f ms", r.SamplerCPUMS)
	}
	fmt.Fprintln(w, ")")
	if r.Headline != "" {
		fmt.Fprintln(w, r.Headline)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "note: %s\n", r.Note)
	}
	if r.Shared {
		fmt.Fprintln(w, "note: other processes used this GPU; its utilisation is the device's, not the process's")
	}
	if r.CopyMS > 0 {
		fmt.Fprintf(w, "note: %.1f s read busy by utilization.gpu while no SM was (copies), counted idle\n", r.CopyMS/1000)
	}
	if r.Headline == "" && r.Note == "" {
		fmt.Fprintln(w, "no idle finding: the GPU was busy")
	}
	for _, c := range r.Causes {
		if c.Share < 0.005 {
			continue
		}
		fmt.Fprintf(w, "%5.1f%%  %s  %s\n", 100*c.Share, c.Title, siteText(c.Site))
		for _, l := range c.Lines {
			fmt.Fprintf(w, "        %5.1f%% on %s\n", 100*l.Share, siteText(l))
		}
		if c.Fix != "" {
			fmt.Fprintf(w, "        fix: %s\n", c.Fix)
		}
	}
}

func siteText(s api.IdleSite) string {
	if s.Line == 0 {
		return s.File
	}
	t := fmt.Sprintf("%s:%d", filepath.Base(s.File), s.Line)
	if s.Func != "" {
		t += " (" + s.Func + ")"
	}
	return t
}
