package daemon

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/transport"
	"github.com/vramscope/vramscope/internal/rpccancel"
)

// session is one connection: a client, a subscriber, or an agent.
type session struct {
	d       *Daemon
	conn    *jsonrpc2.Conn
	wire    *transport.Stream
	tcp     bool
	slot    *transport.Slot // a TCP connection's place among TCP's limits
	mu      sync.Mutex
	authed  bool
	closing bool
	agent   *agent        // set by agent.register
	out     chan notice   // notifications, sent by one goroutine; dropped when full
	ready   chan struct{} // closed once conn is set: handlers may run before NewConn returns
	// requests ends each running request's context, by id ($/cancelRequest; cancel.go).
	requests rpccancel.Requests
}

// rpc is the session's connection, once NewConn has returned.
func (s *session) rpc() *jsonrpc2.Conn {
	<-s.ready
	return s.conn
}

type notice struct {
	method string
	params any
}

// handlers maps every method a client or agent may call to its handler, each
// typed by its params and result (handlers.go; a test checks them against
// api.Methods). A new method: its types and entry in daemon/api, a handler
// method on session, and a line here.
var handlers map[string]handler

func init() {
	handlers = map[string]handler{
		api.Hello:            typed((*session).hello),
		api.Status:           typed((*session).status),
		api.ProcessList:      typed((*session).processList),
		api.SnapshotTake:     typed((*session).snapshotTake),
		api.SnapshotImport:   typed((*session).snapshotImport),
		api.SnapshotList:     typed((*session).snapshotList),
		api.SnapshotGet:      typed((*session).snapshotGet),
		api.SnapshotDelete:   typed((*session).snapshotDelete),
		api.AnalysisSummary:  typed((*session).analysisSummary),
		api.AnalysisSites:    typed((*session).analysisSites),
		api.AnalysisFlame:    typed((*session).analysisFlame),
		api.AnalysisReport:   typed((*session).analysisReport),
		api.AnalysisTimeline: typed((*session).analysisTimeline),
		api.AnalysisFindings: typed((*session).analysisFindings),
		api.AnalysisDiff:     typed((*session).analysisDiff),
		api.AnalysisWhatIf:   typed((*session).analysisWhatIf),
		api.CountersDevices:  typed((*session).countersDevices),
		api.CountersSeries:   typedFrom(api.SeriesParams{Device: -1}, (*session).countersSeries),
		api.Subscribe:        typed((*session).subscribe),
		api.CancelRequest:    raw((*session).cancelRequest),
		api.GroupTake:        typed((*session).groupTake),
		api.GroupList:        typed((*session).groupList),
		api.GroupGet:         typed((*session).groupGet),
		api.AnalysisRanks:    typed((*session).analysisRanks),
		api.AgentRegister:    typed((*session).agentRegister),
		api.AgentCaptured:    typed((*session).agentCaptured),
		api.AgentTorch:       notification((*session).agentTorch),
		api.AgentStacks:      notification((*session).agentStacks),
		api.IdleReport:       typed((*session).idleReport),
		api.AgentLevels:      notification((*session).agentLevels),
	}
}

// Handlers lists the method names the daemon answers (for the contract test).
func Handlers() []string {
	names := make([]string, 0, len(handlers))
	for n := range handlers {
		names = append(names, n)
	}
	return names
}

// serveConn serves one connection until it closes. A TCP connection comes
// with a pending slot (transport.Slots.Admit; nil for the Unix socket), and has
// HelloTimeout to prove the token before it is closed.
func (d *Daemon) serveConn(c net.Conn, slot *transport.Slot) {
	tcp := slot != nil
	s := &session{d: d, tcp: tcp, slot: slot, authed: !tcp, out: make(chan notice, 256), ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.wire = transport.NewStream(c, s.isAuthed)
	s.conn = jsonrpc2.NewConn(ctx, s.wire, jsonrpc2.AsyncHandler(closingHandler{s, jsonrpc2.HandlerWithError(s.handle).SuppressErrClosed()}),
		jsonrpc2.SetLogger(discard{}))
	close(s.ready)
	if tcp {
		timer := time.AfterFunc(d.cfg.TCPLimits.HelloTimeout, s.helloExpired)
		defer timer.Stop()
		defer d.tcp.Release(slot)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		s.conn.Close()
		return
	}
	d.sessions[s] = struct{}{}
	d.mu.Unlock()
	go s.sendNotices(ctx)
	<-s.conn.DisconnectNotify()
	d.mu.Lock()
	delete(d.sessions, s)
	d.mu.Unlock()
	d.events.unsubscribe(s)
	if a := s.agent; a != nil {
		d.agentGone(a, "connection closed")
	}
}

// handle dispatches one request, recovering from a panic in any handler.
func (s *session) handle(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.d.cfg.Logf("panic in %s: %v\n%s", req.Method, r, debug.Stack())
			result, err = nil, rpcErr(api.CodeInternal, "internal error in %s: %v (the daemon goes on; please report it)", req.Method, r)
		}
	}()
	s.d.requests.Add(1)
	params := s.wire.Params(req.Params)
	if !s.isAuthed() && req.Method != api.Hello {
		s.closeAfterReply()
		return nil, rpcErr(api.CodeUnauthorized, "call daemon.hello with the token first")
	}
	h, ok := handlers[req.Method]
	if !ok {
		return nil, rpcErr(jsonrpc2.CodeMethodNotFound, "unknown method %q", req.Method)
	}
	ctx, done := s.requests.Track(ctx, req)
	defer done()
	res, err := h.serve(s, ctx, params)
	if err != nil && ctx.Err() != nil {
		return nil, rpcErr(api.CodeCancelled, "%s: cancelled by the client", req.Method)
	}
	if err != nil {
		return nil, wireError(err)
	}
	return res, nil
}

func (s *session) isAuthed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authed
}

// helloExpired closes a TCP connection that has not proved the token in time:
// until it does, it holds a slot any local user can take.
func (s *session) helloExpired() {
	if s.isAuthed() {
		return
	}
	s.wire.End(api.CodeUnauthorized, fmt.Sprintf("no daemon.hello with the token within %s: closing", s.d.cfg.TCPLimits.HelloTimeout))
}

// closingHandler closes the connection after the reply when the handler
// asked for it (an unauthenticated TCP client).
type closingHandler struct {
	s     *session
	inner jsonrpc2.Handler
}

func (h closingHandler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	defer h.s.wire.Handled()
	h.inner.Handle(ctx, conn, req)
	h.s.mu.Lock()
	closing := h.s.closing
	h.s.mu.Unlock()
	if closing {
		conn.Close()
	}
}

func (s *session) closeAfterReply() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// notify queues a notification; a subscriber that does not keep up loses
// notifications rather than slowing the daemon.
func (s *session) notify(method string, params any) {
	select {
	case s.out <- notice{method, params}:
	default:
	}
}

func (s *session) sendNotices(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-s.out:
			if err := s.rpc().Notify(ctx, n.method, n.params); err != nil {
				return
			}
		}
	}
}

func rpcErr(code int64, format string, args ...any) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

type discard struct{}

func (discard) Printf(string, ...any) {}
