// Package rpccancel keeps the requests a JSON-RPC connection is running, so
// that $/cancelRequest can end one: the daemon's sessions and the language
// server both answer it the same way.
package rpccancel

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// Requests is the running requests of one connection, by id. The zero value
// is ready to use.
type Requests struct {
	mu      sync.Mutex
	running map[jsonrpc2.ID]context.CancelFunc
}

// Track gives a request a context of its own, ended by Cancel naming its id
// or by ctx ending (the connection's); the returned func ends it and forgets
// the request once it is answered. A notification has no id: it keeps ctx.
func (r *Requests) Track(ctx context.Context, req *jsonrpc2.Request) (context.Context, func()) {
	if req.Notif {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	if r.running == nil {
		r.running = map[jsonrpc2.ID]context.CancelFunc{}
	}
	r.running[req.ID] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.running, req.ID)
		r.mu.Unlock()
		cancel()
	}
}

// Cancel ends the context of the request $/cancelRequest's params name, if it
// still runs. An unknown id (answered already) is not an error; params that
// name no id are (the caller words the error).
func (r *Requests) Cancel(params json.RawMessage) error {
	var p struct {
		ID jsonrpc2.ID `json:"id"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return err
	}
	r.mu.Lock()
	cancel := r.running[p.ID]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}
