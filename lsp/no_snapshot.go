package lsp

import (
	"context"
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
)

// sayWhyNothingShown tells the user, once after the start, why the editor
// shows no memory yet and how to get some: no snapshot setting, and the
// daemon off, unreachable (and why), or holding no snapshot. Run in the
// background by initialized; silent once a snapshot is shown or asked for.
func (s *Server) sayWhyNothingShown() {
	if s.currentSettings().Snapshot != "" {
		return // opening it says what went wrong, if anything
	}
	why := "the daemon is off (--daemon off)"
	if s.cfg.Daemon != "off" {
		why = s.daemonWhy()
	}
	if why == "" || s.somethingAsked() {
		return
	}
	s.showMessage(msgInfo, "vramscope: no snapshot to show: no vramscope.snapshot setting, and "+why+
		". Set vramscope.snapshot to a snapshot file (relative paths: to the workspace folder), run the vramscope.openSnapshot command, or take one (vramscope.takeSnapshot, vramscope snap PID).")
}

// daemonWhy waits for the first connection attempt and says what the daemon
// offers: "" when it stores snapshots and follows new ones (one will show).
func (s *Server) daemonWhy() string {
	d := s.link()
	if d == nil {
		return "the daemon is not connected"
	}
	select {
	case <-d.tried:
	case <-time.After(30 * time.Second):
	case <-s.lifeContext().Done():
		return ""
	}
	c, err := d.get()
	if err != nil {
		return err.Error()
	}
	var list api.ListResult
	ctx, cancel := context.WithTimeout(s.lifeContext(), 10*time.Second)
	defer cancel()
	if err := c.Call(ctx, api.SnapshotList, api.ListParams{}, &list); err != nil {
		return "listing the daemon's snapshots failed: " + err.Error()
	}
	if n := len(list.Snapshots); n > 0 {
		return fmt.Sprintf("none of the daemon's %d stored snapshots is open (newest: %s)", n, list.Snapshots[0].Path)
	}
	return "the daemon has stored no snapshot yet (hints appear when one lands)"
}

// somethingAsked says whether a snapshot is shown or on its way.
func (s *Server) somethingAsked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil || s.pending != ""
}
