package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
)

// pythonRank starts the real Python agent (jupyter/vramscope) in a child
// process as rank `rank` of torchrun launch runID; its "snapshot" is the
// test hook's copy of src. Rank 0 simulates an out-of-memory error once the
// file oomFlag exists (when oomFlag is set).
func pythonRank(t *testing.T, socket, runID string, rank int, src, oomFlag string) int {
	t.Helper()
	script := fmt.Sprintf(`import os, time, vramscope
from vramscope.agent import _agent
vramscope.attach()
flag = %q
for _ in range(1200):
    if flag and os.path.exists(flag):
        _agent._simulate_oom()
        flag = ""
    time.sleep(0.05)
`, oomFlag)
	cmd := startPython(t, script, []string{"PYTHONPATH=" + mustAbs("../jupyter"), "VRAMSCOPE_SOCKET=" + socket,
		"VRAMSCOPE_TEST_SNAPSHOT=" + mustAbs(src), "TORCHELASTIC_RUN_ID=" + runID, "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
		fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("LOCAL_RANK=%d", rank), "WORLD_SIZE=2"})
	return cmd.Process.Pid
}

// TestPythonRanksGroup: two real agents of one launch (and one of another)
// register with their launch's facts; group.take captures both, each
// reporting when it read its state; then rank 0's simulated out-of-memory
// error captures rank 1 into an oom group.
func TestPythonRanksGroup(t *testing.T) {
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	stored := make(chan api.GroupResult, 4)
	sub.Notify = func(method string, p json.RawMessage) {
		var g api.GroupResult
		if method == api.EventGroupStored && json.Unmarshal(p, &g) == nil && g.Reason == "oom" {
			stored <- g
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"group_stored"}}, nil)
	flag := filepath.Join(t.TempDir(), "oom-now")
	r0 := pythonRank(t, cfg.Socket, "launch-a", 0, whatifRanks[1], flag)
	r1 := pythonRank(t, cfg.Socket, "launch-a", 1, whatifRanks[2], "")
	other := pythonRank(t, cfg.Socket, "launch-b", 0, whatifRanks[0], "")
	for _, pid := range []int{r0, r1, other} {
		waitAgent(t, d, pid, false)
	}
	c := dial(t, cfg.Socket)
	var g api.GroupResult
	call(t, c, api.GroupTake, api.GroupTakeParams{PID: r1}, &g)
	if g.Job != "run:launch-a" || len(g.Members) != 2 || g.Members[0].PID != r0 || g.Members[1].PID != r1 || len(g.Failed) != 0 {
		t.Fatalf("group %+v", g)
	}
	m0, m1 := g.Members[0].CapturedMS, g.Members[1].CapturedMS
	now := float64(time.Now().UnixMicro()) / 1000
	if m0 <= now-60e3 || m0 > now || m1 <= now-60e3 || m1 > now || g.SkewMS != max(m0, m1)-min(m0, m1) {
		t.Errorf("capture times %.3f, %.3f (now %.3f), skew %.3f", m0, m1, now, g.SkewMS)
	}
	t.Logf("two real agents captured %.1f ms apart", g.SkewMS)

	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case og := <-stored:
		if og.Job != "run:launch-a" || len(og.Members) != 2 || len(og.Snapshots) != 2 || og.Snapshots[0].Reason != "oom" || og.Snapshots[1].Reason != "oom" {
			t.Errorf("group after rank 0's OOM: %+v", og)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no group after rank 0's out-of-memory error")
	}
}
