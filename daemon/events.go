package daemon

import (
	"context"
	"strings"
	"sync"

	"github.com/vramscope/vramscope/daemon/api"
)

// events fans notifications out to the sessions that subscribed, and to
// the daemon's own listeners (the Prometheus counters).
type events struct {
	mu        sync.Mutex
	subs      map[*session]map[string]bool
	listeners []func(method string, params any)
}

// listen calls f with every event, on the publisher's goroutine: f must be
// quick and must not publish.
func (e *events) listen(f func(method string, params any)) {
	e.mu.Lock()
	e.listeners = append(e.listeners, f)
	e.mu.Unlock()
}

func newEvents() *events { return &events{subs: map[*session]map[string]bool{}} }

func (e *events) unsubscribe(s *session) {
	e.mu.Lock()
	delete(e.subs, s)
	e.mu.Unlock()
}

// publish sends method (an event.* name) to every session subscribed to its topic.
func (e *events) publish(method string, params any) {
	topic := strings.TrimPrefix(method, "event.")
	e.mu.Lock()
	var to []*session
	for s, topics := range e.subs {
		if topics[topic] {
			to = append(to, s)
		}
	}
	ls := e.listeners
	e.mu.Unlock()
	for _, f := range ls {
		f(method, params)
	}
	for _, s := range to {
		s.notify(method, params)
	}
}

func (s *session) subscribe(_ context.Context, p api.SubscribeParams) (api.Empty, error) {
	topics := map[string]bool{}
	known := map[string]bool{}
	for _, m := range api.Methods {
		if m.Dir == api.Notification {
			known[strings.TrimPrefix(m.Name, "event.")] = true
		}
	}
	if len(p.Topics) == 0 {
		for t := range known {
			topics[t] = t != "counters_tick"
		}
	}
	for _, t := range p.Topics {
		t = strings.TrimPrefix(t, "event.")
		if !known[t] {
			return api.Empty{}, fail(errInvalid, "unknown topic %q", t)
		}
		topics[t] = true
	}
	s.d.events.mu.Lock()
	s.d.events.subs[s] = topics
	s.d.events.mu.Unlock()
	return api.Empty{}, nil
}
