// Package lsp is vramscope's language server (vramscope lsp, over stdio): it
// puts a snapshot's memory on the source lines that hold it — inlay hints,
// hovers with stacks, code lenses, diagnostics for findings — and runs the
// editor's commands (take, open and compare snapshots, flame graphs). It reads
// snapshots through the engine (profiler/analyze), once each, and talks to the
// daemon through daemon/client; it never imports the NVML sampler.
//
// One file per LSP method; handlers stay thin and call into state.go,
// document.go and daemon.go where the work is.
package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/rpccancel"
)

// Config is what `vramscope lsp` passes in from its flags.
type Config struct {
	Snapshot string // open this snapshot at start (offline mode)
	Socket   string // the daemon's socket; "" = the default
	Daemon   string // "auto" (connect, start one if none), "connect", "off"
	Exe      string // the vramscope binary, to start a daemon
	Logf     func(format string, args ...any)
}

// Server is one language-server session.
type Server struct {
	cfg  Config
	log  *serverLog // cfg.Logf goes through it
	conn *jsonrpc2.Conn

	mu         sync.Mutex
	settings   Settings
	clientCaps clientCaps
	roots      []string // workspace folders
	paths      paths
	docs       map[string]*document
	snaps      *snapshots
	current    *loaded             // the snapshot the editor shows
	showAsks   int64               // show requests numbered so far (nextShow)
	shownAsk   int64               // the number of the request whose snapshot is current
	pending    string              // the snapshot of the newest show request, shown or not
	published  map[string]bool     // URIs with diagnostics from us
	idle       []api.IdleResult    // the daemon's processes whose GPU idles, by line (idle.go)
	warnings   map[int]warningDiag // the daemon's memory warnings that name a line, by pid (memory_warning.go)
	daemon     *daemonLink
	shutdown   bool
	inited     bool // initialize was answered
	exited     chan struct{}
	ready      chan struct{} // closed once conn is set: handlers may run before NewConn returns
	// life ends when Serve returns (the editor closed or exited): analyses
	// started in the background stop with it.
	life     context.Context
	requests rpccancel.Requests // running requests, by id ($/cancelRequest)
}

type handler func(s *Server, ctx context.Context, params json.RawMessage) (any, error)

// methods maps each LSP method to its handler (one file each). Methods in
// async run on their own goroutine: they may take as long as an analysis.
var (
	methods = map[string]handler{}
	async   = map[string]bool{}
)

func register(method string, h handler, isAsync bool) {
	methods[method] = h
	async[method] = isAsync
}

// New makes a server; Serve runs it.
func New(cfg Config) *Server {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Daemon == "" {
		cfg.Daemon = "auto"
	}
	log := newServerLog(cfg.Logf)
	cfg.Logf = log.printf // never blocks on stderr
	return &Server{cfg: cfg, log: log, settings: defaultSettings(), docs: map[string]*document{}, snaps: newSnapshots(cfg.Logf),
		published: map[string]bool{}, exited: make(chan struct{}), ready: make(chan struct{})}
}

// Serve speaks LSP (Content-Length framing) on rwc until the client exits or
// the stream ends. A stream that breaks the protocol (a bad header, a
// message over its limit, input that ends inside a message) ends the session
// with an error that says what was wrong.
func (s *Server) Serve(ctx context.Context, rwc io.ReadWriteCloser) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop() // every request still running, and every analysis, stops
	s.life = ctx
	st := newStream(rwc)
	s.conn = jsonrpc2.NewConn(ctx, st, s, jsonrpc2.SetLogger(quiet{}), jsonrpc2.OnRecv(st.onRecv))
	close(s.ready)
	select {
	case <-s.conn.DisconnectNotify():
	case <-s.exited:
		s.conn.Close()
	case <-ctx.Done():
		s.conn.Close()
	}
	if d := s.link(); d != nil {
		d.close()
	}
	if err := st.readErr(); err != nil {
		return fmt.Errorf("reading from the editor: %w", err)
	}
	return nil
}

// Handle implements jsonrpc2.Handler: in order, except the async methods.
func (s *Server) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	ctx, done := s.requests.Track(ctx, req)
	if async[req.Method] {
		go func() {
			defer done()
			s.handle(ctx, conn, req)
		}()
		return
	}
	defer done()
	s.handle(ctx, conn, req)
}

func (s *Server) handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	res, err := s.call(ctx, req)
	if err != nil && ctx.Err() != nil {
		err = &jsonrpc2.Error{Code: codeRequestCancelled, Message: req.Method + ": cancelled"}
	}
	if req.Notif {
		if err != nil {
			s.log.notifyError(req.Method, err) // at most a line per method and interval
		}
		return
	}
	if err != nil {
		re, ok := err.(*jsonrpc2.Error)
		if !ok {
			re = &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
		}
		conn.ReplyWithError(ctx, req.ID, re)
		return
	}
	conn.Reply(ctx, req.ID, res)
}

// call runs one handler, recovering from a panic so the server stays up.
func (s *Server) call(ctx context.Context, req *jsonrpc2.Request) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logf("panic in %s: %v\n%s", req.Method, r, debug.Stack())
			res, err = nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: fmt.Sprintf("internal error in %s: %v", req.Method, r)}
		}
	}()
	if !s.isInitialized() && req.Method != "initialize" && req.Method != "exit" {
		if req.Notif {
			return nil, nil // dropped, as the protocol asks
		}
		return nil, &jsonrpc2.Error{Code: codeServerNotInitialized, Message: "server not initialized: " + req.Method + " before initialize"}
	}
	h, ok := methods[req.Method]
	if !ok {
		if req.Notif {
			return nil, nil // unknown notifications ($/cancelRequest, …) are ignored
		}
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "method not supported: " + req.Method}
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	res, err = h(s, ctx, params)
	if req.Method == "initialize" && err == nil {
		s.mu.Lock()
		s.inited = true
		s.mu.Unlock()
	}
	return res, err
}

// codeServerNotInitialized is LSP's ServerNotInitialized: the answer to any
// request before initialize.
const codeServerNotInitialized = -32002

func (s *Server) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inited
}

func decode(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return nil
	}
	if err := json.Unmarshal(params, v); err != nil {
		return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	return nil
}

// client is the connection to the editor once Serve has made it; nil for a
// server that is not serving (tests that call handlers directly).
func (s *Server) client() *jsonrpc2.Conn {
	select {
	case <-s.ready:
		return s.conn
	default:
		return nil
	}
}

// notify sends a notification without waiting for anything.
func (s *Server) notify(method string, params any) {
	if c := s.client(); c != nil {
		c.Notify(context.Background(), method, params)
	}
}

// ask sends a request to the client from a goroutine of its own: a handler
// must never wait on its own outgoing call (handlers run in order).
func (s *Server) ask(method string) {
	if c := s.client(); c != nil {
		go c.Call(context.Background(), method, nil, nil)
	}
}

// showMessage tells the user something in one line.
func (s *Server) showMessage(typ int, msg string) {
	s.notify("window/showMessage", map[string]any{"type": typ, "message": msg})
}

// Message types of window/showMessage.
const (
	msgError   = 1
	msgWarning = 2
	msgInfo    = 3
)

type quiet struct{}

func (quiet) Printf(string, ...any) {}
