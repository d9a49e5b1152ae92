package lsp

import (
	"context"
	"encoding/json"
)

func init() { register("shutdown", (*Server).shutdownRequest, false) }

func (s *Server) shutdownRequest(context.Context, json.RawMessage) (any, error) {
	s.mu.Lock()
	s.shutdown = true
	s.mu.Unlock()
	return nil, nil
}
