package lsp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/analyze"
	"go.lsp.dev/protocol"
)

func init() { register("textDocument/codeAction", (*Server).codeAction, false) }

// codeAction offers, on a line that ran out of memory in the shown snapshot,
// the plans that would have fitted (the finding's, profiler/analyze/fit_oom.go):
// the action runs vramscope.showFitPlans, which opens them (fit_plans.go).
func (s *Server) codeAction(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.CodeActionParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	actions := []protocol.CodeAction{}
	d, l := s.document(p.TextDocument.URI), s.shown()
	if d == nil || l == nil {
		return actions, nil
	}
	for _, f := range l.result.Findings {
		if f.Kind != analyze.KindOOM || len(f.Plans) == 0 || f.Line <= 0 || !s.paths.same(s.paths.local(f.File), d.path) {
			continue
		}
		line, _, ok := s.placeLine(l, d.path, f.Line)
		if r := lineRange(line); !ok || r.Start.Line < p.Range.Start.Line || r.Start.Line > p.Range.End.Line {
			continue
		}
		title := "vramscope: fits with " + f.Plans[0].Title
		if n := len(f.Plans); n > 1 {
			title += fmt.Sprintf(" (or %d more plans)", n-1)
		}
		actions = append(actions, protocol.CodeAction{
			Title: title, Kind: protocol.QuickFix, Diagnostics: oomDiagnostics(p.Context.Diagnostics),
			Command: &protocol.Command{Title: title, Command: command.ShowFitPlans,
				Arguments: []any{command.FitPlansArgs{File: f.File, Line: f.Line}}},
		})
	}
	return actions, nil
}

// oomDiagnostics are the out-of-memory diagnostics among ds (the action fixes them).
func oomDiagnostics(ds []protocol.Diagnostic) []protocol.Diagnostic {
	var out []protocol.Diagnostic
	for _, d := range ds {
		if c, ok := d.Code.(string); ok && c == analyze.KindOOM && d.Source == "vramscope" {
			out = append(out, d)
		}
	}
	return out
}
