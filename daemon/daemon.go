// Package daemon is vramscope's per-user process (vramscope serve): it listens
// on a Unix socket (and optionally loopback TCP with a token), keeps a registry
// of the agents inside training processes, asks them for snapshots, stores
// snapshots crash-safely (daemon/store), analyses them once through the engine
// (profiler/analyze), samples NVML counters (daemon/counters) and serves it all
// as the JSON-RPC API of daemon/api. One file per feature: listen, session
// (a connection), agents, snapshots, analysis, counters, events.
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
	"github.com/vramscope/vramscope/daemon/kube"
	"github.com/vramscope/vramscope/daemon/store"
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
	analyses  *analyses
	events    *events
	counters  *counterSource
	stacks    *stackStore    // the agents' stack samples, for idle.report
	pods      *kube.Resolver // pod names for processes in Kubernetes pods
	counts    *exportCounts  // events since start, for Prometheus
	warner    *memoryWarner  // per-step levels -> the warning before the card fills (warning.go)
	tcp       *tcpSlots
	refusals  refusalLog
	requests  atomic.Int64  // requests handled, all connections; tests count what a peer got through
	exportMax int           // caps the metrics listener's connections (descriptors.go)
	spoolMu   sync.Mutex    // held by a spool scan (spool.go)
	stopped   chan struct{} // closed by Close

	socket    *ownedFile // the socket and token this daemon made, removed by Close
	tokenFile *ownedFile

	mu         sync.Mutex
	listeners  []net.Listener
	export     *http.Server // metrics and profiles (export.go), once serving
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
	b, err := sizeBudget(fileLimit(), cfg.TCPLimits)
	if err != nil {
		return nil, err
	}
	cfg.TCPLimits = b.tcp
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
		tcp:       newTCPSlots(cfg.TCPLimits),
		sessions:  map[*session]struct{}{},
		pods:      pods,
		counts:    newExportCounts(),
		exportMax: b.export,
		stopped:   make(chan struct{}),
	}
	d.events.listen(d.count)
	d.warner = newMemoryWarner(d.memoryWarning)
	d.analyses = newAnalyses(st, 8, maxCacheBytes, cfg.Logf)
	d.analyses.augment = func(id string, r *analyze.Result) {
		if m, ok := st.Get(id); ok {
			r.Findings = append(r.Findings, nonPyTorchFindings(m, r, d.snapshotDeviceTotal(m))...)
			r.Findings = append(r.Findings, d.idleFindings(m)...)
			d.roadOf(m, r)
		}
	}
	st.OnRemove(d.analyses.drop)
	d.counters = openCounters(cfg)
	d.stacks = newStackStore()
	return d, nil
}

// Serve listens and serves until ctx ends or Close is called. The Unix
// socket comes first: when another daemon owns it, this one leaves its TCP
// port and token alone.
func (d *Daemon) Serve(ctx context.Context) error {
	ul, sock, err := listenUnix(d.cfg.Socket)
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
		if tl, err = listenTCP(d.cfg.TCP); err != nil {
			d.Close()
			return err
		}
		// The token is on disk before the port is announced (Addr): a client
		// that sees the port reads this run's token, not an earlier one.
		tok, file, err := writeToken(d.cfg.TokenFile)
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
		el, err := listenExport(d.cfg.Export)
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
		var slot *tcpSlot
		if tcp {
			slot, c = d.tcp.admit(c, func(why string) {
				d.refusals.note(d.cfg.Logf, errors.New(why))
				go refuse(c, api.CodeBusy, why) // not on the accept loop: refuse may wait lingerTime
			})
		} else if uid, err := peerUID(c); err != nil || (uid >= 0 && uid != os.Getuid()) {
			d.refusals.note(d.cfg.Logf, fmt.Errorf("a connection from uid %d (%v)", uid, errOtherUser))
			refuse(c, api.CodeUnauthorized, errOtherUser.Error())
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
		export := d.export
		owned := []*ownedFile{d.socket, d.tokenFile}
		ss := make([]*session, 0, len(d.sessions))
		for s := range d.sessions {
			ss = append(ss, s)
		}
		d.mu.Unlock()
		for _, l := range ls {
			l.Close()
		}
		if export != nil {
			export.Close()
		}
		for _, s := range ss {
			s.rpc().Close()
		}
		d.counters.Stop()
		for _, f := range owned {
			f.remove()
		}
		d.analyses.pending.Wait()
		d.closeErr = d.store.Close()
	})
	return d.closeErr
}
