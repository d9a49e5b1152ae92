package export

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vramscope/vramscope/daemon/metrics"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// Config is the HTTP listener for Prometheus (/metrics) and pprof tools
// (/debug/pprof/gpu_memory). It serves without a token, so it binds loopback
// addresses only unless Public says otherwise (docs/security.md).
type Config struct {
	Addr   string // e.g. "127.0.0.1:9464"; "" = no listener
	Public bool   // allow a non-loopback address (a pod's IP, 0.0.0.0)
}

// Listen binds the metrics listener. It answers anyone who reaches it
// without a token (Prometheus and pprof scrapers carry none), so without
// Public it binds loopback only: ":9464" means 127.0.0.1:9464, and any other
// host is refused. With Public, ":9464" is every address (in a pod, its own
// network namespace, where a NetworkPolicy decides who may reach it).
func Listen(e Config) (net.Listener, error) {
	host, port, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %q: %v", e.Addr, err)
	}
	if host == "localhost" || (host == "" && !e.Public) {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); !e.Public && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--metrics %q: the metrics and profiles are served without a token, so only loopback addresses (127.0.0.1, ::1) are allowed; pass --metrics-public to serve them on %s", e.Addr, host)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", e.Addr, err)
	}
	return l, nil
}

// Sources are what the exporter reads, each at the request that needs it:
// the daemon hands them in.
type Sources struct {
	State     func() metrics.State                     // what a scrape reports, read now
	Snapshots func() []store.Meta                      // the stored snapshots, newest first
	Analysis  func(id string) (*analyze.Result, error) // a stored snapshot's analysis (cached, or decoded once)
}

// Handler serves Prometheus's /metrics and pprof's /debug/pprof/gpu_memory
// from src.
func Handler(src Sources) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(src.State))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4, // a scrape costs a few allocations; more in flight is a misconfigured scraper
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /debug/pprof/gpu_memory", src.gpuMemoryProfile)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "vramscope\n/metrics                    Prometheus metrics (docs/metrics.md)\n"+
			"/debug/pprof/gpu_memory    the latest snapshot's memory at its peak, as a pprof profile (?pid=, ?rank=, ?pod=, ?namespace=, ?id=)\n")
	})
	return mux
}

// NewServer is the HTTP server of h on l, and l with its connections capped
// at maxConns (Conns; evicted notes each idle connection closed to make
// room). Serve it on the listener it returns.
func NewServer(h http.Handler, l net.Listener, maxConns int, evicted func()) (*http.Server, net.Listener) {
	conns := NewConns(l, maxConns)
	conns.Evicted = evicted
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 3 * time.Minute, // a profile may wait for a snapshot's first analysis
		// Scrapers come back every 15 s or more; a connection idle longer
		// only holds a descriptor (Conns caps them too).
		IdleTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: nil,
		ConnState: conns.State}
	return srv, conns
}
