package lsp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/internal/daemontest"
	"github.com/vramscope/vramscope/lsp/command"
)

// TestWithTheDaemon: the server follows the snapshots the daemon stores,
// lists processes and reports the daemon's state for the status bar; when the
// daemon dies the status says so and the shown snapshot stays.
func TestWithTheDaemon(t *testing.T) {
	d := daemontest.Start(t)
	socket := d.Socket
	var cl *client.Client
	for i := 0; i < 200 && cl == nil; i++ {
		cl, _ = client.Dial(context.Background(), socket, "test")
		time.Sleep(10 * time.Millisecond)
	}
	if cl == nil {
		t.Fatal("no daemon")
	}
	defer cl.Close()

	c := start(t, Config{Daemon: "connect", Socket: socket}, nil)
	u := c.open(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	var sb command.StatusBar
	for i := 0; i < 300 && !sb.Daemon; i++ {
		c.call("workspace/executeCommand", map[string]any{"command": command.Status}, &sb)
		time.Sleep(10 * time.Millisecond)
	}
	if !sb.Daemon {
		t.Fatalf("the server never reached the daemon: %+v", sb)
	}
	// A snapshot lands in the store: the editor shows it without being asked.
	var stored api.SnapshotResult
	if err := cl.Call(context.Background(), api.SnapshotImport, api.ImportParams{Path: filepath.Join(fixtures, "snapshots/gpt2_train.pickle")}, &stored); err != nil {
		t.Fatal(err)
	}
	c.waitShown(stored.ID + ".pickle")
	if len(c.hints(u)) == 0 {
		t.Error("no hints from the daemon's snapshot")
	}
	var list api.ListResult
	c.call("workspace/executeCommand", map[string]any{"command": command.ListSnapshots}, &list)
	if len(list.Snapshots) != 1 {
		t.Errorf("listSnapshots: %+v", list)
	}
	var procs api.ProcessListResult
	c.call("workspace/executeCommand", map[string]any{"command": command.ListProcesses}, &procs)
	// With no agent, take snapshot says why.
	err := c.conn.Call(context.Background(), "workspace/executeCommand", map[string]any{"command": command.TakeSnapshot}, nil)
	if err == nil || !strings.Contains(err.Error(), "0 processes have an agent") {
		t.Errorf("take without agents: %v", err)
	}
	// The daemon goes away: the status bar says so, hints stay (offline).
	d.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.call("workspace/executeCommand", map[string]any{"command": command.Status}, &sb)
		if !sb.Daemon {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("status still says the daemon runs")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(sb.Reason, "not running") {
		t.Errorf("status reason %q", sb.Reason)
	}
	if len(c.hints(u)) == 0 {
		t.Error("hints gone with the daemon")
	}
	b, _ := json.Marshal(sb)
	t.Logf("status without daemon: %s", b)
}
