package daemon

import (
	"context"
	"crypto/subtle"
	"os"
	"strings"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
)

func major(v string) string {
	m, _, _ := strings.Cut(v, ".")
	return m
}

func (s *session) hello(_ context.Context, p api.HelloParams) (api.HelloResult, error) {
	if s.tcp {
		if s.d.token == "" || subtle.ConstantTimeCompare([]byte(p.Token), []byte(s.d.token)) != 1 {
			s.closeAfterReply()
			return api.HelloResult{}, fail(errUnauthorized, "wrong or missing token (read it from %s)", s.d.cfg.TokenFile)
		}
		if err := s.authenticate(); err != nil {
			return api.HelloResult{}, err
		}
	}
	if p.APIVersion != "" && major(p.APIVersion) != major(api.Version) {
		return api.HelloResult{}, fail(errVersion, "client speaks API %s, the daemon %s: upgrade the older one", p.APIVersion, api.Version)
	}
	return s.d.helloResult(), nil
}

// authenticate marks a TCP session as past hello, trading its pending slot
// for an authenticated one (once, however many hellos it sends).
func (s *session) authenticate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.authed {
		return nil
	}
	if err := s.d.tcp.Promote(s.slot); err != nil {
		s.closing = true
		return err // a transport.ErrBusy: wireError gives it CodeBusy
	}
	s.authed = true
	return nil
}

func (d *Daemon) helloResult() api.HelloResult {
	return api.HelloResult{Version: d.cfg.Version, APIVersion: api.Version, PID: os.Getpid(), Host: d.host}
}

func (s *session) status(_ context.Context, _ noParams) (api.StatusResult, error) {
	d := s.d
	return api.StatusResult{
		HelloResult: d.helloResult(),
		Started:     d.started.UTC().Format(time.RFC3339),
		Socket:      d.cfg.Socket,
		TCP:         d.Addr(),
		DataDir:     d.cfg.DataDir,
		Agents:      d.agents.count(),
		Snapshots:   len(d.store.List()),
		Counters:    d.counters.Status(),
	}, nil
}
