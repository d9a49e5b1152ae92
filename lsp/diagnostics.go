package lsp

import (
	"fmt"

	"github.com/vramscope/vramscope/profiler"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// publishDiagnostics turns the shown snapshot's findings into diagnostics on
// the local files they point at, with the evidence lines as related
// information, and clears the files that no longer have any.
func (s *Server) publishDiagnostics() {
	l := s.shown()
	byURI := map[string][]protocol.Diagnostic{}
	if l != nil {
		for _, f := range l.result.Findings {
			if f.File == "" || f.Line <= 0 {
				continue
			}
			local := s.paths.local(f.File)
			u := string(uri.File(local))
			diag := protocol.Diagnostic{
				Range:    lineRange(f.Line),
				Severity: severity(f.Severity),
				Code:     f.Kind,
				Source:   "vramscope",
				Message:  f.Title,
			}
			if f.Fix != "" {
				diag.Message += "\nFix: " + f.Fix
			}
			for _, ev := range f.Evidence.Lines {
				if ev.File == "" || ev.Line <= 0 {
					continue
				}
				diag.RelatedInformation = append(diag.RelatedInformation, protocol.DiagnosticRelatedInformation{
					Location: protocol.Location{URI: uri.File(s.paths.local(ev.File)), Range: lineRange(ev.Line)},
					Message:  fmt.Sprintf("%s (%s)", ev.Note, profiler.FormatBytes(ev.Bytes)),
				})
			}
			byURI[u] = append(byURI[u], diag)
		}
	}
	s.mu.Lock()
	old := s.published
	s.published = map[string]bool{}
	for u := range byURI {
		s.published[u] = true
	}
	s.mu.Unlock()
	for u, diags := range byURI {
		s.notify("textDocument/publishDiagnostics", protocol.PublishDiagnosticsParams{URI: uri.URI(u), Diagnostics: diags})
	}
	for u := range old {
		if _, still := byURI[u]; !still {
			s.notify("textDocument/publishDiagnostics", protocol.PublishDiagnosticsParams{URI: uri.URI(u), Diagnostics: []protocol.Diagnostic{}})
		}
	}
}

func lineRange(line int) protocol.Range {
	l := uint32(max(line-1, 0))
	return protocol.Range{Start: protocol.Position{Line: l}, End: protocol.Position{Line: l, Character: 1 << 16}}
}

func severity(s string) protocol.DiagnosticSeverity {
	switch s {
	case "error":
		return protocol.DiagnosticSeverityError
	case "warning":
		return protocol.DiagnosticSeverityWarning
	case "info":
		return protocol.DiagnosticSeverityInformation
	}
	return protocol.DiagnosticSeverityHint
}
