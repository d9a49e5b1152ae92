package daemon

import (
	"context"
	"encoding/json"

	"github.com/vramscope/vramscope/daemon/api"
)

// cancelRequest ends the context of the request it names, if it still runs:
// its handler stops waiting, and an analysis no other request waits for stops
// decoding. An unknown id (answered already) is not an error. Requests get
// their context from s.requests.Track (session.go), ended too when the
// connection closes.
func (s *session) cancelRequest(_ context.Context, raw json.RawMessage) (any, error) {
	if err := s.requests.Cancel(raw); err != nil {
		return nil, fail(errInvalid, "%s: %v", api.CancelRequest, err)
	}
	return nil, nil
}
