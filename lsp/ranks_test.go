package lsp

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/daemontest"
	"github.com/vramscope/vramscope/lsp/command"
)

// rankAgent registers as rank `rank` of torchrun launch "lspjob" and
// answers agent.dump with a copy of src.
func rankAgent(t *testing.T, socket string, pid, rank int, src string) {
	daemontest.Agent(t, socket, api.RegisterParams{PID: pid, Host: "test", Rank: rank, LocalRank: rank, WorldSize: 2,
		Argv: []string{"python", "train.py"}, Device: 0, Recording: true, JobFacts: api.JobFacts{RunID: "lspjob", PPID: 99}}, src)
}

// TestRankPicker: Take Snapshot of the whole job shows the heaviest rank
// (the whatif recordings at batch 4 and 8 stand in for ranks 0 and 1 of one
// launch); the picker lists both, and opening the other rank's snapshot is
// what the picker's choice does: the list then says it is shown.
func TestRankPicker(t *testing.T) {
	socket := daemontest.Start(t).Socket
	whatif, _ := filepath.Abs("../examples/snapshots/whatif")
	rankAgent(t, socket, 8100, 0, filepath.Join(whatif, "whatif_bs4.pickle"))
	rankAgent(t, socket, 8101, 1, filepath.Join(whatif, "whatif_bs8.pickle"))

	c := start(t, Config{Daemon: "connect", Socket: socket}, nil)
	var sb command.StatusBar
	for deadline := time.Now().Add(10 * time.Second); !sb.Daemon && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c.call("workspace/executeCommand", map[string]any{"command": command.Status}, &sb)
	}
	var pick command.RankPick
	c.call("workspace/executeCommand", map[string]any{"command": command.TakeJobSnapshot, "arguments": []any{map[string]any{"pid": 8100}}}, &pick)
	if pick.Job != "run:lspjob" || len(pick.Ranks) != 2 || pick.Max != 1 || pick.Shown != 1 || !pick.Ranks[1].Outlier || pick.Ranks[1].Path == "" {
		t.Fatalf("takeJobSnapshot: %+v", pick)
	}
	c.waitShown(filepath.Base(pick.Ranks[1].Path))
	var summary command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot, "arguments": []any{map[string]any{"path": pick.Ranks[0].Path}}}, &summary)
	var again command.RankPick
	c.call("workspace/executeCommand", map[string]any{"command": command.Ranks, "arguments": []any{map[string]any{"group": pick.Group}}}, &again)
	if again.Shown != 0 || summary.PeakBytes != again.Ranks[0].Peak {
		t.Errorf("after opening rank 0: shown %d, peak %d vs %d", again.Shown, summary.PeakBytes, again.Ranks[0].Peak)
	}
	err := c.conn.Call(context.Background(), "workspace/executeCommand", map[string]any{"command": command.Ranks, "arguments": []any{map[string]any{"group": "job-nope"}}}, nil)
	if err == nil {
		t.Error("ranks of no group: no error")
	}
}
