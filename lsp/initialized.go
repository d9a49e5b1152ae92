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
// why it cannot; the analysis stops if the editor closes first.
func (s *Server) openAndShow(path string) (*loaded, error) {
	ctx := s.life
	if ctx == nil {
		ctx = context.Background() // not serving (tests that call methods directly)
	}
	return s.openAndShowContext(ctx, path)
}

// openAndShowContext is openAndShow for a request that may be cancelled.
func (s *Server) openAndShowContext(ctx context.Context, path string) (*loaded, error) {
	l, err := s.snaps.loadContext(ctx, path)
	if ctx.Err() != nil {
		return nil, ctx.Err() // cancelled, or the editor closed: nothing to say
	}
	if err != nil {
		s.showMessage(msgError, "vramscope: "+err.Error())
		return nil, err
	}
	s.show(l)
	return l, nil
}
