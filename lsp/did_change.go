package lsp

import (
	"context"
	"encoding/json"

	"go.lsp.dev/protocol"
)

func init() { register("textDocument/didChange", (*Server).didChange, false) }

// didChange replaces the document's text (full sync).
func (s *Server) didChange(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DidChangeTextDocumentParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if len(p.ContentChanges) == 0 {
		return nil, nil
	}
	d := newDocument(p.TextDocument.URI, p.ContentChanges[len(p.ContentChanges)-1].Text) // full sync
	s.mu.Lock()
	s.docs[string(d.uri)] = d
	s.mu.Unlock()
	return nil, nil
}
