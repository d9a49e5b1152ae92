package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

func init() { register("initialized", (*Server).initialized, false) }

// initialized opens the configured snapshot (offline mode) and connects to
// the daemon, both in the background: the editor never waits on them.
func (s *Server) initialized(context.Context, json.RawMessage) (any, error) {
	st := s.currentSettings()
	if st.Snapshot != "" {
		n := s.nextShow(st.Snapshot)
		go s.openAndShowAsked(s.lifeContext(), st.Snapshot, n)
	}
	if s.cfg.Daemon != "off" {
		s.mu.Lock()
		s.daemon = &daemonLink{tried: make(chan struct{})} // before sayWhyNothingShown looks
		s.mu.Unlock()
		go s.connectDaemon()
		go s.followIdle(s.lifeContext())
	}
	go s.sayWhyNothingShown()
	return nil, nil
}

// lifeContext ends when the editor closes.
func (s *Server) lifeContext() context.Context {
	if s.life == nil {
		return context.Background() // not serving (tests that call methods directly)
	}
	return s.life
}

// openAndShowContext analyses a snapshot (once) and shows it, or says in one
// line why it cannot; the analysis stops when ctx ends (the request is
// cancelled, the editor closes).
func (s *Server) openAndShowContext(ctx context.Context, path string) (*loaded, error) {
	return s.openAndShowAsked(ctx, path, s.nextShow(path))
}

// openAndShowAsked opens the snapshot of show request n (nextShow, taken when
// the request came: a goroutine may start late). Analyses finish in any order;
// the newest request wins, so a snapshot that lands in the background never
// replaces one the user asked for after it.
func (s *Server) openAndShowAsked(ctx context.Context, path string, n int64) (*loaded, error) {
	end := s.analysisProgress(path)
	l, err := s.snaps.loadContext(ctx, path)
	if ctx.Err() != nil {
		end("cancelled")
		return nil, ctx.Err() // cancelled, or the editor closed: nothing to say
	}
	if err != nil {
		end("failed")
		s.showMessage(msgError, "vramscope: "+err.Error())
		return nil, err
	}
	end(fmt.Sprintf("%s: %s at peak", filepath.Base(l.path), profiler.FormatBytes(l.result.Peak.Bytes)))
	// This runs on a goroutine of its own: a panic while showing the
	// analysis would end the server; it becomes an error message instead.
	if err := analyze.Guard(path, func() error { s.showAsked(l, n); return nil }); err != nil {
		analyze.LogPanic(s.cfg.Logf, err)
		s.showMessage(msgError, "vramscope: "+err.Error())
		return nil, err
	}
	return l, nil
}
