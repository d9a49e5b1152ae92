package daemon

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
)

func steps(from, to int64) []api.StepLevel {
	var out []api.StepLevel
	for i := from; i < to; i++ {
		out = append(out, api.StepLevel{Step: i, UnixMS: 1_000 + i, Allocated: 1 << 30, Peak: 1<<30 + 2048*(2<<20),
			Inputs: [][]int64{{8, 256}}, Phase: "train"})
	}
	return out
}

func TestLevelsMergeOutOfOrderReplaceResentAndStayBounded(t *testing.T) {
	var p procLevels
	p.add(steps(10, 20))
	p.add(steps(0, 10)) // an earlier notification handled later
	again := steps(5, 6)
	again[0].Allocated = 7
	p.add(again) // resent after a reconnect
	got := p.params(1 << 62).Levels
	if len(got) != 20 {
		t.Fatalf("%d steps; want 20", len(got))
	}
	for i, l := range got {
		if l.Step != int64(i) {
			t.Fatalf("step %d at %d", l.Step, i)
		}
	}
	if got[5].Allocated != 7 {
		t.Error("a resent step did not replace the first")
	}
	if n := len(p.params(1_000 + 9).Levels); n != 10 {
		t.Errorf("%d steps up to a snapshot's time; want 10", n)
	}
	p.add(steps(20, 20+maxLevels+maxLevels/4+1))
	all := p.params(1 << 62).Levels
	if len(all) != maxLevels || all[len(all)-1].Step != 20+maxLevels+maxLevels/4 {
		t.Errorf("%d steps kept, last %d; want the last %d", len(all), all[len(all)-1].Step, maxLevels)
	}
}

// TestOOMSnapshotKeepsItsRoad: an agent sends 36 steps with agent.levels
// (two notifications, the later first), then runs out of memory at a batch of
// long sequences and hands the snapshot over with the 4 steps not sent yet;
// the daemon stores the 40 beside the snapshot, the report draws them and
// the OOM finding says what changed.
func TestOOMSnapshotKeepsItsRoad(t *testing.T) {
	d, cfg := testDaemon(t)
	ag := fakeAgent(t, cfg.Socket, 7001, nil)
	ctx := context.Background()
	for _, b := range [][2]int64{{18, 36}, {0, 18}} {
		if err := ag.Notify(ctx, api.AgentLevels, api.LevelsParams{Device: 0, Cap: 9 << 30, Levels: steps(b[0], b[1])}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if pl := d.levels.of(7001, false); pl != nil && len(pl.params(1<<62).Levels) == 36 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not keep the 36 steps sent")
		}
	}
	tail := steps(36, 40)
	tail[3].Inputs, tail[3].OOM, tail[3].Peak = [][]int64{{16, 1024}}, true, 5<<30
	part := filepath.Join(d.store.IncomingDir(), "7001-oom.part")
	if err := copyFile(fixtures+"oom_batch.pickle", part); err != nil {
		t.Fatal(err)
	}
	var res api.SnapshotResult
	err := ag.Call(ctx, api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: part,
		Levels: &api.LevelsParams{Cap: 9 << 30, Levels: tail}}, Reason: "oom"}, &res)
	if err != nil {
		t.Fatal(err)
	}
	stored, ok, err := d.readLevels(res.ID)
	if err != nil || !ok || len(stored.Levels) != 40 || stored.Cap != 9<<30 || !stored.Levels[39].OOM {
		t.Fatalf("stored levels: ok %v, err %v, %d steps, cap %d", ok, err, len(stored.Levels), stored.Cap)
	}
	c := dial(t, cfg.Socket)
	var rep struct {
		Road     analyze.Road      `json:"road"`
		Findings []analyze.Finding `json:"findings"`
	}
	var raw json.RawMessage
	call(t, c, api.AnalysisReport, api.IDParams{ID: res.ID}, &raw)
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Road.Total != 40 || rep.Road.Change == nil || rep.Road.Change.Kind != "input" || rep.Road.Change.Step != 39 {
		t.Fatalf("road: %d steps, change %+v", rep.Road.Total, rep.Road.Change)
	}
	var title string
	for _, f := range rep.Findings {
		if f.Kind == analyze.KindOOM {
			title = f.Title
		}
	}
	if !strings.Contains(title, "step 39: inputs 16 × 1024 (16,384 tokens), 8.0× the tokens of steps 0–38") {
		t.Errorf("OOM finding: %q", title)
	}
	// the agent goes: the daemon forgets its levels, the snapshot keeps them
	ag.Close()
	for deadline := time.Now().Add(10 * time.Second); d.levels.of(7001, false) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("levels kept after the agent went")
		}
	}
	d.analyses.Drop(res.ID)
	var again json.RawMessage
	call(t, c, api.AnalysisReport, api.IDParams{ID: res.ID}, &again)
	if !strings.Contains(string(again), `"road":{"steps":[`) {
		t.Error("a fresh analysis of the stored snapshot has no road")
	}
}
