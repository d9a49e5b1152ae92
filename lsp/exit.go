package lsp

import (
	"context"
	"encoding/json"
)

func init() { register("exit", (*Server).exit, false) }

func (s *Server) exit(context.Context, json.RawMessage) (any, error) {
	select {
	case <-s.exited:
	default:
		close(s.exited)
	}
	return nil, nil
}
