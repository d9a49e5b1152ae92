// Package daemon is vramscope's per-user process (vramscope serve) and the
// composition root of its parts: it keeps the Daemon, its sessions (one per
// connection) and the handler table, the registry of the agents inside
// training processes and what they report live (levels.go, stacks.go, the
// OOM warning of warning*.go), the events subscribers read, and the NVML and
// pod glue (counters_rpc.go, pods.go, phase.go, nonpytorch.go). The work below the
// sessions lives in packages whose names say their jobs, none of which
// imports this one:
//
//	daemon/transport  listeners, peer credentials, the token, TCP slots, the descriptor budget, the JSON-RPC stream
//	daemon/capture    the agent's stream into the store, the agents' spool, the cache of analyses
//	daemon/export     /metrics and /debug/pprof/gpu_memory over Sources the daemon hands it
//	daemon/store      the crash-safe snapshot store
//	daemon/counters   NVML samples; daemon/metrics the Prometheus collector; daemon/kube pods
//	daemon/api        the JSON-RPC contract
//
// Handlers return domain errors (fail(errNotFound, …), or a part's own, such
// as transport.ErrBusy); wireError in handlers.go maps them to JSON-RPC codes,
// there and nowhere else.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/daemon/export"
	"github.com/vramscope/vramscope/daemon/kube"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/daemon/transport"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// Daemon is one running daemon.
type Daemon struct {
	cfg     Config
	store   *store.Store
	started time.Time
	host    string
	token   string

	agents    *agents
	levels    *levelStore // each agent's per-step levels (levels.go)
	analyses  *capture.Analyses
	events    *events
	counters  *counterSource
	stacks    *stackStore    // the agents' stack samples, for idle.report
	pods      *kube.Resolver // pod names for processes in Kubernetes pods
	counts    *exportCounts  // events since start, for Prometheus
	warner    *memoryWarner  // per-step levels -> the warning before the card fills (warning.go)
	tcp       *transport.Slots
	refusals  transport.RefusalLog
	requests  atomic.Int64  // requests handled, all connections; tests count what a peer got through
	exportMax int           // caps the metrics listener's connections (transport.Budget)
	spoolMu   sync.Mutex    // held by a spool scan (spool.go)
	stopped   chan struct{} // closed by Close

	socket    *transport.OwnedFile // the socket and token this daemon made, removed by Close
	tokenFile *transport.OwnedFile

	mu         sync.Mutex
	listeners  []net.Listener
	export     *http.Server // metrics and profiles (daemon/export), once serving
	exportAddr string
	sessions   map[*session]struct{}
	wg         sync.WaitGroup
	closed     bool
	closeOnce  sync.Once
	closeErr   error
}

// New opens the store and, unless disabled, the NVML sampler. It does not
// listen yet.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	b, err := transport.SizeBudget(transport.FileLimit(), cfg.TCPLimits)
	if err != nil {
		return nil, err
	}
	cfg.TCPLimits = b.TCP
	cfg.Logf("budget: %s", b)
	st, err := store.Open(cfg.DataDir, store.Limits{MaxCount: cfg.MaxSnapshots, MaxBytes: cfg.MaxBytes})
	if err != nil {
		return nil, err
	}
	for _, r := range st.Recovered() {
		cfg.Logf("store: %s", r)
	}
	pods, err := newPods(cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	d := &Daemon{
		cfg: cfg, store: st, started: time.Now(), host: host,
		agents:    newAgents(),
		levels:    newLevelStore(),
		events:    newEvents(),
		tcp:       transport.NewSlots(cfg.TCPLimits),
		sessions:  map[*session]struct{}{},
		pods:      pods,
		counts:    newExportCounts(),
		exportMax: b.Export,
		stopped:   make(chan struct{}),
	}
	d.events.listen(d.count)
	d.warner = newMemoryWarner(d.memoryWarning)
	d.analyses = capture.NewAnalyses(st, 8, capture.MaxCacheBytes, cfg.Logf)
	d.analyses.Augment = func(id string, r *analyze.Result) {
		if m, ok := st.Get(id); ok {
			r.Findings = append(r.Findings, nonPyTorchFindings(m, r, d.snapshotDeviceTotal(m))...)
			r.Findings = append(r.Findings, d.idleFindings(m)...)
			d.roadOf(m, r)
		}
	}
	st.OnRemove(d.analyses.Drop)
	d.counters = openCounters(cfg)
	d.stacks = newStackStore()
	return d, nil
}

// Serve listens and serves until ctx ends or Close is called. The Unix
// socket comes first: when another daemon owns it, this one leaves its TCP
// port and token alone.
func (d *Daemon) Serve(ctx context.Context) error {
	ul, sock, err := transport.ListenUnix(d.cfg.Socket)
	if err != nil {
		d.Close()
		return err
	}
	d.addListener(ul)
	d.mu.Lock()
	d.socket = sock
	d.mu.Unlock()
	var tl net.Listener
	if d.cfg.TCP != "" {
		if tl, err = transport.ListenTCP(d.cfg.TCP); err != nil {
			d.Close()
			return err
		}
		// The token is on disk before the port is announced (Addr): a client
		// that sees the port reads this run's token, not an earlier one.
		tok, file, err := transport.WriteToken(d.cfg.TokenFile)
		if err != nil {
			tl.Close()
			d.Close()
			return err
		}
		d.mu.Lock()
		d.token, d.tokenFile = tok, file
		d.mu.Unlock()
		d.addListener(tl)
	}
	if d.cfg.Export.Addr != "" {
		el, err := export.Listen(d.cfg.Export)
		if err != nil {
			d.Close()
			return err
		}
		d.mu.Lock()
		d.exportAddr = el.Addr().String()
		d.mu.Unlock()
		go d.serveExport(el)
	}
	d.cfg.Logf("listening on %s (data in %s)", d.cfg.Socket, d.cfg.DataDir)
	if tl != nil {
		d.cfg.Logf("listening on %s (token in %s)", tl.Addr(), d.cfg.TokenFile)
		go d.accept(tl, true)
	}
	d.counters.Start(ctx, d.tick)
	go d.watchSpool(d.stopped)
	go func() { <-ctx.Done(); d.Close() }()
	d.accept(ul, false)
	d.wg.Wait()
	return d.Close()
}

// Addr is the TCP listener's address, "" when there is none.
func (d *Daemon) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.listeners {
		if l.Addr().Network() == "tcp" {
			return l.Addr().String()
		}
	}
	return ""
}

func (d *Daemon) addListener(l net.Listener) {
	d.mu.Lock()
	d.listeners = append(d.listeners, l)
	d.mu.Unlock()
}

func (d *Daemon) accept(l net.Listener, tcp bool) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.cfg.Logf("accept: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var slot *transport.Slot
		if tcp {
			slot, c = d.tcp.Admit(c, func(why string) {
				d.refusals.Note(d.cfg.Logf, errors.New(why))
				go transport.Refuse(c, api.CodeBusy, why) // not on the accept loop: Refuse may wait a moment
			})
		} else if uid, err := transport.PeerUID(c); err != nil || (uid >= 0 && uid != os.Getuid()) {
			d.refusals.Note(d.cfg.Logf, fmt.Errorf("a connection from uid %d (%v)", uid, transport.ErrOtherUser))
			transport.Refuse(c, api.CodeUnauthorized, transport.ErrOtherUser.Error())
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.serveConn(c, slot)
		}()
	}
}

// Close stops listening, closes every connection, the sampler and the store,
// and removes the socket. Concurrent callers all return once it is done.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		close(d.stopped)
		ls := d.listeners
		exporter := d.export
		owned := []*transport.OwnedFile{d.socket, d.tokenFile}
		ss := make([]*session, 0, len(d.sessions))
		for s := range d.sessions {
			ss = append(ss, s)
		}
		d.mu.Unlock()
		for _, l := range ls {
			l.Close()
		}
		if exporter != nil {
			exporter.Close()
		}
		for _, s := range ss {
			s.rpc().Close()
		}
		d.counters.Stop()
		for _, f := range owned {
			f.Remove()
		}
		d.analyses.Wait()
		d.closeErr = d.store.Close()
	})
	return d.closeErr
}
