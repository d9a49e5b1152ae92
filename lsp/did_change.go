package lsp

import (
	"context"
	"encoding/json"

	"go.lsp.dev/protocol"
)

func init() { register("textDocument/didChange", (*Server).didChange, false) }

// didChange applies the edits (incremental sync: ranges; or whole texts) to
// the document and its line maps, so hints, hovers, lenses and diagnostics
// stay on the statements the snapshot recorded; the diagnostics of the file
// move with them.
func (s *Server) didChange(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		TextDocument protocol.VersionedTextDocumentIdentifier `json:"textDocument"`
		// Range is a pointer: a change without one replaces the whole text.
		ContentChanges []struct {
			Range *protocol.Range `json:"range"`
			Text  string          `json:"text"`
		} `json:"contentChanges"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	d := s.docs[string(p.TextDocument.URI)]
	if d == nil {
		s.mu.Unlock()
		return nil, nil // not opened: nothing to follow
	}
	for _, c := range p.ContentChanges {
		d.change(c.Range, c.Text)
	}
	s.mu.Unlock()
	if s.hasDiagnostics(d.path) {
		s.publishDiagnostics()
	}
	return nil, nil
}
