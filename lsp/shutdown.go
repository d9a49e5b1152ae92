package lsp

import (
	"context"
	"encoding/json"
)

func init() {
	register("shutdown", (*Server).shutdownRequest, false)
	register("exit", (*Server).exit, false)
}

func (s *Server) shutdownRequest(context.Context, json.RawMessage) (any, error) {
	s.mu.Lock()
	s.shutdown = true
	s.mu.Unlock()
	return nil, nil
}

func (s *Server) exit(context.Context, json.RawMessage) (any, error) {
	select {
	case <-s.exited:
	default:
		close(s.exited)
	}
	return nil, nil
}
