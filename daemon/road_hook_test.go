package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/vramscope/vramscope/daemon/api"
)

// TestLevelsOverTheWireWarn: an agent sends the H200 leak run's steps with
// agent.levels, 100 at a time, as its agent would; the daemon warns once,
// long before step 635 where the run ran out, with a snapshot whose
// analysis names the growing line, and ps's forecast follows.
func TestLevelsOverTheWireWarn(t *testing.T) {
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	got := make(chan api.MemoryWarning, 4)
	sub.Notify = func(method string, raw json.RawMessage) {
		var w api.MemoryWarning
		if method == api.EventMemoryWarning && json.Unmarshal(raw, &w) == nil {
			got <- w
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"memory_warning"}}, nil)
	ag := fakeAgent(t, cfg.Socket, 7101, func(_ *jsonrpc2.Conn, path string) (any, error) {
		return copyDump("../examples/snapshots/leak_steps.pickle", path)
	})
	levels, capBytes, oomStep, _ := recordedLevels(t, "leak")
	var steps []api.StepLevel
	for _, l := range levels {
		steps = append(steps, api.StepLevel{Step: int64(l.Step), UnixMS: 1_800_000_000_000 + int64(l.TimeS*1000),
			Allocated: l.Allocated, Reserved: l.Reserved, Peak: l.Peak, Phase: "train"})
	}
	for i := 0; i < len(steps); i += 100 {
		p := api.LevelsParams{Device: 0, Cap: capBytes, Levels: steps[i:min(i+100, len(steps))]}
		if err := ag.Notify(context.Background(), api.AgentLevels, p); err != nil {
			t.Fatal(err)
		}
		waitKept(t, d, 7101, i+len(p.Levels)) // as an agent sends them: every 2 s, each handled before the next
	}
	var w api.MemoryWarning
	select {
	case w = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no memory_warning")
	}
	f := w.Forecast
	t.Logf("warned at step %d: full at step %d, %.2f MiB/step (%s); the run failed at step %d", f.Step, f.ProjectedStep, f.BytesPerStep/(1<<20), f.Evidence.Series, oomStep)
	if f.Step >= 400 || f.ProjectedStep < 600 || f.ProjectedStep > 660 || f.Capacity != capBytes {
		t.Errorf("forecast: %+v", f)
	}
	if w.Snapshot == nil || w.Snapshot.Reason != "warning" || w.Growing == nil || !strings.HasSuffix(w.Growing.File, "record_examples.py") {
		t.Errorf("warning: snapshot %+v, growing %+v, error %q", w.Snapshot, w.Growing, w.SnapshotError)
	}
	var ps api.ProcessListResult
	call(t, dial(t, cfg.Socket), api.ProcessList, nil, &ps)
	if pf := ps.Processes[0].Forecast; pf == nil || !pf.Warned {
		t.Errorf("process.list's forecast: %+v", pf)
	}
	select {
	case w2 := <-got:
		t.Errorf("a second warning: %+v", w2.Forecast)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestForecastLevelsSkipsUnread: steps whose allocator the agent did not
// read (-1) and the step measured at the error are left out.
func TestForecastLevelsSkipsUnread(t *testing.T) {
	steps := []api.StepLevel{{Step: 1, UnixMS: 1000, Allocated: 5, Reserved: 9, Peak: 7}, {Step: 2, Allocated: -1, Reserved: -1, Peak: -1},
		{Step: 3, UnixMS: 3500, Allocated: 6, Reserved: 9, Peak: 8}, {Step: 4, Allocated: 8, Reserved: 9, Peak: 9, OOM: true}}
	got := forecastLevels(steps, 10)
	if len(got) != 2 || got[1].Step != 3 || got[1].TimeS != 3.5 || got[1].Peak != 8 {
		t.Errorf("%+v", got)
	}
	if got := forecastLevels(steps, 2); len(got) != 1 || got[0].Step != 3 {
		t.Errorf("the last 2: %+v", got)
	}
}

// waitKept waits until the daemon keeps n steps of pid.
func waitKept(t *testing.T, d *Daemon, pid, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if pl := d.levels.of(pid, false); pl != nil && len(pl.params(1<<62).Levels) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not keep %d steps of pid %d", n, pid)
		}
	}
}
