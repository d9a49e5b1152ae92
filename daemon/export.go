package daemon

import (
	"fmt"
	"net"
	"net/http"

	"github.com/vramscope/vramscope/daemon/export"
)

// serveExport serves the metrics and profiles of daemon/export on l until
// the daemon closes.
func (d *Daemon) serveExport(l net.Listener) {
	h := export.Handler(export.Sources{State: d.metricsState, Snapshots: d.store.List, Analysis: d.analyses.Get})
	srv, conns := export.NewServer(h, l, d.exportMax, func() {
		d.refusals.Note(d.cfg.Logf, fmt.Errorf("metrics: an idle connection closed for a new one (%d open, the cap)", d.exportMax))
	})
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
