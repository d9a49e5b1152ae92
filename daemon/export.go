package daemon

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vramscope/vramscope/daemon/metrics"
)

// listenExport binds the metrics listener. It answers anyone who reaches
// it without a token (Prometheus and pprof scrapers carry none), so without
// Export.Public it binds loopback only: ":9464" means 127.0.0.1:9464, and
// any other host is refused. With Public, ":9464" is every address (in a
// pod, its own network namespace, where a NetworkPolicy decides who may
// reach it).
func listenExport(e Export) (net.Listener, error) {
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

// serveExport serves Prometheus's /metrics and pprof's
// /debug/pprof/gpu_memory on l until the daemon closes.
func (d *Daemon) serveExport(l net.Listener) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(d.metricsState))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4, // a scrape costs a few allocations; more in flight is a misconfigured scraper
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /debug/pprof/gpu_memory", d.gpuMemoryProfile)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "vramscope\n/metrics                    Prometheus metrics (docs/metrics.md)\n"+
			"/debug/pprof/gpu_memory    the latest snapshot's memory at its peak, as a pprof profile (?pid=, ?rank=, ?pod=, ?namespace=, ?id=)\n")
	})
	conns := newExportConns(l, d.exportMax)
	conns.evict = func() {
		d.refusals.Note(d.cfg.Logf, fmt.Errorf("metrics: an idle connection closed for a new one (%d open, the cap)", d.exportMax))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 3 * time.Minute, // a profile may wait for a snapshot's first analysis
		// Scrapers come back every 15 s or more; a connection idle longer
		// only holds a descriptor (exportConns caps them too).
		IdleTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: nil,
		ConnState: conns.state}
	d.mu.Lock()
	closed := d.closed
	if !closed {
		d.export = srv
	}
	d.mu.Unlock()
	if closed {
		l.Close()
		return
	}
	d.cfg.Logf("metrics and profiles on http://%s/metrics", l.Addr())
	if err := srv.Serve(conns); err != nil && err != http.ErrServerClosed {
		d.cfg.Logf("metrics: %v", err)
	}
}

// ExportAddr is the metrics listener's address, "" when there is none.
func (d *Daemon) ExportAddr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exportAddr
}
