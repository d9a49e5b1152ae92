package lsp

import (
	"context"
	"encoding/json"

	"go.lsp.dev/protocol"
)

func init() { register("textDocument/didClose", (*Server).didClose, false) }

func (s *Server) didClose(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DidCloseTextDocumentParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	d := s.docs[string(p.TextDocument.URI)]
	delete(s.docs, string(p.TextDocument.URI))
	s.mu.Unlock()
	if d != nil && s.hasDiagnostics(d.path) {
		s.publishDiagnostics() // placed through the file on disk from now on
	}
	return nil, nil
}
