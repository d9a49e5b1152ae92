package lsp

// textDocument/didOpen keeps the open document's text: hints go at the end
// of its lines, lenses above its function definitions.

import (
	"context"
	"encoding/json"

	"go.lsp.dev/protocol"
)

func init() { register("textDocument/didOpen", (*Server).didOpen, false) }

func (s *Server) didOpen(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DidOpenTextDocumentParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	d := newDocument(p.TextDocument.URI, p.TextDocument.Text)
	s.mu.Lock()
	s.docs[string(d.uri)] = d
	s.mu.Unlock()
	if d.path != "" {
		s.paths.addRoot(d.path)
	}
	return nil, nil
}
