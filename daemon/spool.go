package daemon

// spool.go: the daemon imports the out-of-memory snapshots that agents
// spooled (daemon/capture's Spool) once their process has exited: at start,
// every spoolInterval and when an agent goes.

import (
	"errors"
	"os"
	"time"

	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/daemon/store"
)

const spoolInterval = 30 * time.Second

// DefaultSpoolDir is where agents spool (capture.DefaultSpoolDir).
func DefaultSpoolDir() string { return capture.DefaultSpoolDir() }

// watchSpool imports the spool now and every spoolInterval until done.
func (d *Daemon) watchSpool(done <-chan struct{}) {
	t := time.NewTicker(spoolInterval)
	defer t.Stop()
	for {
		d.importSpool()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// importSpool imports every spooled snapshot whose process has exited, one
// scan at a time.
func (d *Daemon) importSpool() {
	if d.cfg.Spool == "" {
		return
	}
	d.spoolMu.Lock()
	defer d.spoolMu.Unlock()
	sp, err := capture.OpenSpool(d.cfg.Spool)
	if sp == nil {
		if err != nil {
			d.cfg.Logf("spool: %v", err)
		}
		return
	}
	defer sp.Close()
	for _, base := range sp.Snapshots() {
		if err := d.importSpooled(sp, base); err != nil {
			d.cfg.Logf("spool: %s: %v", sp.Path(base+".json"), err)
		}
	}
}

// importSpooled imports the snapshot base (oom-PID-MS-N) if its process has
// exited.
func (d *Daemon) importSpooled(sp *capture.Spool, base string) error {
	side, err := sp.Sidecar(base)
	if err != nil {
		return err
	}
	if side.Host != d.host || !capture.ProcessGone(side.PID, side.TimeMS) {
		return nil // its own agent hands it over (or another host's daemon)
	}
	f, path, err := sp.Claim(base)
	if f == nil {
		return err // nil: its agent took it
	}
	m, err := d.importClaimed(f, path, side)
	f.Close()
	if err != nil {
		if errors.Is(err, errBadSnapshot) {
			sp.SetAside(base) // not a snapshot: not tried again every spoolInterval
			return err
		}
		sp.Unclaim(base) // the next scan tries again
		return err
	}
	sp.Imported(base)
	d.cfg.Logf("spool: imported %s (the out-of-memory snapshot of pid %d, which has exited) as %s", base, side.PID, m.ID)
	go d.publishOOM(d.snapshotResult(m), side.Captured.OOM)
	return nil
}

// importClaimed copies the claimed pickle f (at path) into the store and
// commits it, with the meta agent.captured would have given it.
func (d *Daemon) importClaimed(f *os.File, path string, side capture.Sidecar) (store.Meta, error) {
	part, err := d.store.StageFrom(f, path)
	if err != nil {
		return store.Meta{}, err
	}
	c := side.Captured
	meta := store.Meta{Reason: "oom", Source: firstArg(side.Argv), PID: side.PID, Host: side.Host,
		Device: c.Device, Entries: c.Entries, TookMS: c.TookMS, Label: "spooled"}
	return d.commit(part, path, meta)
}
