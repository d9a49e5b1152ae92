package lsp

import (
	"context"
	"encoding/json"
)

func init() {
	register("workspace/didChangeConfiguration", (*Server).didChangeConfiguration, false)
}

func (s *Server) didChangeConfiguration(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Settings json.RawMessage `json:"settings"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	old := s.settings
	s.settings = s.settings.merge(p.Settings)
	s.mu.Unlock()
	st := s.resolveSettings()
	s.resetPaths(st)
	if st.Snapshot != "" && st.Snapshot != old.Snapshot {
		n := s.nextShow(st.Snapshot)
		go s.openAndShowAsked(s.lifeContext(), st.Snapshot, n)
		return nil, nil
	}
	if s.shown() != nil {
		s.redraw()
	}
	return nil, nil
}
