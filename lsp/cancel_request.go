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
// answers RequestCancelled. Requests get their context from s.requests.Track
// (server.go), ended too when the session ends. It runs in order with the
// editor's messages, so it reaches only requests that run on their own
// goroutine (the async methods).
func (s *Server) cancelRequest(_ context.Context, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if err := s.requests.Cancel(raw); err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	return nil, nil
}
