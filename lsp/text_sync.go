package lsp

// textDocument/didOpen, didChange and didClose keep the open documents' text:
// hints go at the end of lines, lenses above function definitions.

import (
	"context"
	"encoding/json"

	"go.lsp.dev/protocol"
)

func init() {
	register("textDocument/didOpen", (*Server).didOpen, false)
	register("textDocument/didChange", (*Server).didChange, false)
	register("textDocument/didClose", (*Server).didClose, false)
}

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

func (s *Server) didClose(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DidCloseTextDocumentParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.docs, string(p.TextDocument.URI))
	s.mu.Unlock()
	return nil, nil
}
