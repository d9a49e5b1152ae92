package api

import (
	"strings"
	"testing"
)

func TestMethodsAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	dirs := map[Direction]bool{ClientToDaemon: true, AgentToDaemon: true, DaemonToAgent: true, Notification: true, AgentNotice: true, ClientNotice: true}
	for _, m := range Methods {
		if seen[m.Name] {
			t.Errorf("%s is listed twice", m.Name)
		}
		seen[m.Name] = true
		if !dirs[m.Dir] {
			t.Errorf("%s: unknown direction %q", m.Name, m.Dir)
		}
		if m.Doc == "" {
			t.Errorf("%s has no doc", m.Name)
		}
		notice := m.Dir == Notification || m.Dir == AgentNotice || m.Dir == ClientNotice
		if notice != (m.Result == nil) {
			t.Errorf("%s: notifications, and only they, have no result", m.Name)
		}
		if m.Dir == Notification && !strings.HasPrefix(m.Name, "event.") {
			t.Errorf("%s: notifications to subscribers are named event.*", m.Name)
		}
	}
}
