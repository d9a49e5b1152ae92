package lsp

import (
	"context"
	"encoding/json"
)

func init() { register("initialized", (*Server).initialized, false) }

// initialized opens the configured snapshot (offline mode) and connects to
// the daemon, both in the background: the editor never waits on them.
func (s *Server) initialized(context.Context, json.RawMessage) (any, error) {
	st := s.currentSettings()
	if st.Snapshot != "" {
		go s.openAndShow(st.Snapshot)
	}
	if s.cfg.Daemon != "off" {
		go s.connectDaemon()
	}
	return nil, nil
}

// openAndShow analyses a snapshot (once) and shows it, or says in one line
// why it cannot.
func (s *Server) openAndShow(path string) (*loaded, error) {
	l, err := s.snaps.load(path)
	if err != nil {
		s.showMessage(msgError, "vramscope: "+err.Error())
		return nil, err
	}
	s.show(l)
	return l, nil
}
