package lsp

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// publishDiagnostics turns the shown snapshot's findings into diagnostics on
// the local files they point at, with the evidence lines as related
// information, adds where the daemon's processes left their GPU idle
// (idle.go), and clears the files that no longer have any. Lines of open
// files follow the user's edits (placeLine).
func (s *Server) publishDiagnostics() {
	l := s.shown()
	byURI := map[string][]protocol.Diagnostic{}
	if l != nil {
		for _, f := range l.result.Findings {
			if f.File == "" || f.Line <= 0 {
				continue
			}
			local := s.paths.local(f.File)
			line, edited, ok := s.placeLine(l, local, f.Line)
			if !ok {
				continue // the user deleted the line
			}
			u := string(uri.File(local))
			diag := protocol.Diagnostic{
				Range:    lineRange(line),
				Severity: severity(f.Severity),
				Code:     f.Kind,
				Source:   "vramscope",
				Message:  f.Title,
			}
			if f.Fix != "" {
				diag.Message += "\nFix: " + f.Fix
			}
			if edited {
				diag.Message += "\n(From before this line was edited.)"
			}
			for _, ev := range f.Evidence.Lines {
				if ev.File == "" || ev.Line <= 0 {
					continue
				}
				evLocal := s.paths.local(ev.File)
				evLine, _, ok := s.placeLine(l, evLocal, ev.Line)
				if !ok {
					continue
				}
				diag.RelatedInformation = append(diag.RelatedInformation, protocol.DiagnosticRelatedInformation{
					Location: protocol.Location{URI: uri.File(evLocal), Range: lineRange(evLine)},
					Message:  evidenceNote(ev.Note, ev.Bytes),
				})
			}
			byURI[u] = append(byURI[u], diag)
		}
	}
	s.idleDiagnostics(byURI)
	for u, diags := range s.warningDiagnostics() {
		byURI[u] = append(byURI[u], diags...)
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

// placeLine is where a recorded line of a local file is now: mapped through
// the edits when the file is open, through the file on disk when it is not.
func (s *Server) placeLine(l *loaded, local string, recorded int) (int, bool, bool) {
	s.mu.Lock()
	var d *document
	for _, doc := range s.docs {
		if s.paths.same(doc.path, local) {
			d = doc
		}
	}
	s.mu.Unlock()
	if d == nil {
		return placeOnDisk(l, local, recorded)
	}
	return s.toCurrent(s.lineMap(d, l), recorded)
}

// placeOnDisk maps a recorded line of a file no editor has open through a
// diff of its recorded source against the file on disk now: saved with
// edits and closed, or changed by a checkout, its diagnostics stay on their
// statements.
func placeOnDisk(l *loaded, local string, recorded int) (int, bool, bool) {
	b, err := os.ReadFile(local)
	if err != nil {
		return recorded, false, true // not here: as recorded
	}
	now := strings.Split(string(b), "\n")
	src := l.recordedSource(local, now)
	if slices.Equal(src, now) {
		return recorded, false, true
	}
	return newLineMap(src, now).toCurrent(recorded)
}

// hasDiagnostics says whether the local file has diagnostics from us.
func (s *Server) hasDiagnostics(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for u := range s.published {
		if filename(protocol.DocumentURI(u)) == path {
			return true
		}
	}
	return false
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

// evidenceNote is an evidence line's note with its bytes; a line without
// bytes (the GPU idled here) is its note alone.
func evidenceNote(note string, bytes int64) string {
	if bytes == 0 {
		return note
	}
	return fmt.Sprintf("%s (%s)", note, profiler.FormatBytes(bytes))
}
