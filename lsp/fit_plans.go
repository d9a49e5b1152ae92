package lsp

// fit_plans.go: vramscope.showFitPlans writes the plans of an out-of-memory
// finding (what fits, predicted from the snapshot) as a Markdown page and
// asks the editor to open it (window/showDocument), else says where it is.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"go.lsp.dev/uri"
)

func (s *Server) cmdShowFitPlans(_ context.Context, a command.FitPlansArgs) (command.FitPlansPage, error) {
	l := s.shown()
	if l == nil {
		return command.FitPlansPage{}, failed("no snapshot is shown")
	}
	var oom *analyze.Finding
	for i, f := range l.result.Findings {
		if f.Kind == analyze.KindOOM && len(f.Plans) > 0 && f.File == a.File && f.Line == a.Line {
			oom = &l.result.Findings[i]
		}
	}
	if oom == nil {
		return command.FitPlansPage{}, invalid(fmt.Sprintf("no out-of-memory finding with plans at %s:%d in %s", a.File, a.Line, l.path))
	}
	dir, err := reportDir()
	if err != nil {
		return command.FitPlansPage{}, failed(err.Error())
	}
	name := nameless.ReplaceAllString(fmt.Sprintf("%s-fit-%s-%d", trimExt(filepath.Base(l.path)), filepath.Base(a.File), a.Line), "_")
	path := filepath.Join(dir, name+".md")
	if err := os.WriteFile(path, []byte(fitPlansMarkdown(l.path, oom)), 0o600); err != nil {
		return command.FitPlansPage{}, failed(fmt.Sprintf("writing the plans %s: %v", path, err))
	}
	page := command.FitPlansPage{Path: path, URI: string(uri.File(path)), Plans: len(oom.Plans)}
	page.Opened = s.openInEditor(page.URI)
	if !page.Opened {
		s.showMessage(msgInfo, "vramscope: the plans that fit are in "+path)
	}
	return page, nil
}

// fitPlansMarkdown is the page: the failure, then each plan with its
// predicted peaks and cost.
func fitPlansMarkdown(snapshot string, f *analyze.Finding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# What fits: %s:%d\n\n%s\n\nFrom `%s`, predicted by `vramscope fit` from the snapshot itself "+
		"(run `vramscope fit %s --budget SIZE` for other sizes and budgets).\n\n", filepath.Base(f.File), f.Line,
		f.Title, snapshot, snapshot)
	b.WriteString("| plan | peak allocated | peak reserved | cost |\n|---|---|---|---|\n")
	for _, p := range f.Plans {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p.Title, profiler.FormatBytes(p.Allocated),
			profiler.FormatBytes(p.Reserved), strings.ReplaceAll(p.Cost, "|", "/"))
	}
	return b.String()
}
