package daemon

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
)

// track gives a request a context of its own, ended by $/cancelRequest naming
// its id or by its connection closing (ctx, the connection's); the returned
// func ends it and forgets the request once it is answered.
func (s *session) track(ctx context.Context, req *jsonrpc2.Request) (context.Context, func()) {
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

// cancelRequest ends the context of the request it names, if it still runs:
// its handler stops waiting, and an analysis no other request waits for stops
// decoding. An unknown id (answered already) is not an error.
func (s *session) cancelRequest(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		ID jsonrpc2.ID `json:"id"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, rpcErr(jsonrpc2.CodeInvalidParams, "%s: %v", api.CancelRequest, err)
	}
	s.mu.Lock()
	cancel := s.inflight[p.ID]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil, nil
}
