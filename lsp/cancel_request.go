package lsp

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
)

func init() { register("$/cancelRequest", (*Server).cancelRequest, false) }

// codeRequestCancelled is LSP's RequestCancelled: the answer to a request the
// editor cancelled.
const codeRequestCancelled = -32800

// cancelRequest ends the context of the request it names, if it still runs
// (an analysis no other request waits for stops decoding); the request then
// answers RequestCancelled. It runs in order with the editor's messages, so it
// reaches only requests that run on their own goroutine (the async methods).
func (s *Server) cancelRequest(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		ID jsonrpc2.ID `json:"id"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cancel := s.inflight[p.ID]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil, nil
}

// track gives a request a context of its own, ended by $/cancelRequest or by
// the session ending; the returned func forgets it once it is answered.
func (s *Server) track(ctx context.Context, req *jsonrpc2.Request) (context.Context, func()) {
	if req.Notif {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[jsonrpc2.ID]context.CancelFunc{}
	}
	s.inflight[req.ID] = cancel
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.inflight, req.ID)
		s.mu.Unlock()
		cancel()
	}
}
