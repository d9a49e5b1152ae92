package transport

import (
	"encoding/json"
	"strconv"
	"sync"
)

// paramStash holds the raw params of requests read but not yet handled, by
// ticket.
type paramStash struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]json.RawMessage
}

func (p *paramStash) put(raw json.RawMessage) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	p.m[p.next] = raw
	return p.next
}

// take returns (and forgets) the params a request's ticket stands for; nil
// for a request without params.
func (p *paramStash) take(ticket *json.RawMessage) json.RawMessage {
	if ticket == nil {
		return nil
	}
	t, err := strconv.ParseUint(string(*ticket), 10, 64)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	raw := p.m[t]
	delete(p.m, t)
	return raw
}
