// Package export serves the daemon's state to tools that pull it over HTTP:
// Prometheus's /metrics (the collector of daemon/metrics over a State the
// daemon reads at each scrape) and pprof's /debug/pprof/gpu_memory (the
// latest stored snapshot that matches the query, as a pprof profile built by
// profiler/pprofenc). The listener binds loopback unless told it may not
// (server.go), and caps its connections so that scrapers cannot exhaust the
// daemon's descriptors (conns.go). It reads the daemon only through the
// Sources it is handed, and never imports it.
package export
