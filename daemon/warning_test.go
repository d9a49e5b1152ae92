package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/forecast"
)

const mib = 1 << 20

// leakLevels is a run that leaks 1 MiB a step under a 4-step saw-tooth, a
// step every 70 ms, from 1.5 GiB: with a 3 GiB cap it is full near step 1,400.
func leakLevels(n int) []forecast.Level { return leakUntil(n, n) }

// leakUntil is leakLevels with the leak stopped at step stop.
func leakUntil(n, stop int) []forecast.Level {
	out := make([]forecast.Level, n)
	for i := range out {
		kept := int64(min(i, stop)) * mib
		p := 1536*mib + kept + int64(i%4)*40*mib
		out[i] = forecast.Level{Step: i, TimeS: 0.07 * float64(i), Allocated: 512*mib + kept, Reserved: p + 100*mib, Peak: p}
	}
	return out
}

// feedLevels observes the prefixes of levels from `from` levels on, 10
// steps at a time, as levels arriving would.
func feedLevels(w *memoryWarner, from, pid int, levels []forecast.Level, capBytes int64) {
	t0 := time.Unix(1_800_000_000, 0)
	for n := from; n <= len(levels); n += 10 {
		w.Observe(pid, levels[:n], capBytes, t0.Add(time.Duration(levels[n-1].TimeS*float64(time.Second))))
	}
}

func recorder() (*memoryWarner, *[]api.MemoryForecast) {
	var fired []api.MemoryForecast
	w := newMemoryWarner(func(_ int, f api.MemoryForecast) { fired = append(fired, f) })
	return w, &fired
}

// TestWarnerOnce: a leak warns once, when the full device is within 10
// minutes or 50 steps; the projection stays visible, marked warned.
func TestWarnerOnce(t *testing.T) {
	w, fired := recorder()
	feedLevels(w, 10, 7, leakLevels(1300), 3<<30)
	if len(*fired) != 1 {
		t.Fatalf("%d warnings, want 1", len(*fired))
	}
	f := (*fired)[0]
	if f.SecondsLeft > nearSeconds && f.StepsLeft > nearSteps {
		t.Errorf("warned %.0f s and %d steps ahead", f.SecondsLeft, f.StepsLeft)
	}
	if f.ProjectedStep < 1300 || f.ProjectedStep > 1600 || !f.Warned || f.ProjectedTime.IsZero() {
		t.Errorf("warning: %+v", f)
	}
	if got := w.forecast(7); got == nil || !got.Warned || got.Step != 1299 {
		t.Errorf("forecast after the warning: %+v", got)
	}
	if w.forecast(8) != nil {
		t.Error("a forecast for a process never observed")
	}
}

// TestWarnerFarOff: the same leak against a whole H200 is projected (the
// gauge has an ETA) but not near: no warning.
func TestWarnerFarOff(t *testing.T) {
	w, fired := recorder()
	feedLevels(w, 10, 7, leakLevels(1300), 141<<30)
	if len(*fired) != 0 {
		t.Errorf("warned of a full H200 %d steps away", (*fired)[0].StepsLeft)
	}
}

// TestWarnerRearm: a warning re-arms only after a real change: a growth
// that stopped for 100 steps, a new capacity, a restarted run.
func TestWarnerRearm(t *testing.T) {
	w, fired := recorder()
	lv := leakUntil(1300, 1100)
	feedLevels(w, 10, 7, lv[:1150], 3<<30)
	if len(*fired) != 1 {
		t.Fatalf("%d warnings before the growth stopped, want 1", len(*fired))
	}
	feedLevels(w, 1160, 7, lv, 3<<30) // flat from step 1100: the growth stopped
	if w.forecast(7) != nil {
		t.Errorf("a forecast after the growth stopped: %+v", w.forecast(7))
	}
	if len(*fired) != 1 {
		t.Errorf("%d warnings after the growth stopped, want still 1", len(*fired))
	}
	if w.procs[7].warned {
		t.Error("not re-armed after 200 steps without growth")
	}
	w2, fired2 := recorder()
	feedLevels(w2, 10, 7, leakLevels(1200), 3<<30)
	w2.Observe(7, leakLevels(1200), 3<<30, time.Now()) // the same: no second warning
	w2.Observe(7, leakLevels(1200), 2<<30, time.Now()) // a smaller cap: warns again
	if len(*fired2) != 2 {
		t.Errorf("%d warnings, want 2 (the second after the cap changed)", len(*fired2))
	}
	w2.Observe(7, leakLevels(100), 2<<30, time.Now()) // a restarted run: re-armed, nothing to project yet
	if w2.procs[7].warned || len(*fired2) != 2 {
		t.Errorf("after the run restarted: warned %v, %d warnings", w2.procs[7].warned, len(*fired2))
	}
	w2.forget(7)
	if w2.forecast(7) != nil {
		t.Error("a forecast for a process that went")
	}
}

// TestMemoryWarningEvent: through a real daemon, levels of a leaking
// process make one memory_warning event, after a snapshot of the process
// (reason warning) whose analysis names the leaking line; process.list
// and the metrics carry the projection.
func TestMemoryWarningEvent(t *testing.T) {
	d, cfg := testDaemon(t)
	sub := dial(t, cfg.Socket)
	got := make(chan api.MemoryWarning, 4)
	sub.Notify = func(method string, raw json.RawMessage) {
		if method == api.EventMemoryWarning {
			var w api.MemoryWarning
			json.Unmarshal(raw, &w)
			got <- w
		}
	}
	call(t, sub, api.Subscribe, api.SubscribeParams{Topics: []string{"memory_warning"}}, nil)
	fakeAgent(t, cfg.Socket, 5151, func(_ *jsonrpc2.Conn, path string) (any, error) {
		return copyDump("../examples/snapshots/leak_steps.pickle", path)
	})
	lv := leakLevels(1100) // full near step 1,320: 15 s to go
	for n := 10; n <= len(lv); n += 10 {
		d.ObserveLevels(5151, lv[:n], 3<<30)
	}
	var w api.MemoryWarning
	select {
	case w = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no memory_warning")
	}
	if w.PID != 5151 || w.Snapshot == nil || w.Snapshot.Reason != "warning" || !strings.HasPrefix(w.Snapshot.Label, "memory warning") {
		t.Fatalf("warning: %+v", w)
	}
	if g := w.Growing; g == nil || g.Kind != "leak" || g.Line != 87 || !strings.HasSuffix(g.File, "examples/record/record_examples.py") {
		t.Errorf("growing line: %+v", w.Growing)
	}
	var ps api.ProcessListResult
	call(t, dial(t, cfg.Socket), api.ProcessList, nil, &ps)
	if f := ps.Processes[0].Forecast; f == nil || !f.Warned || f.Capacity != 3<<30 {
		t.Errorf("process.list: %+v", ps.Processes[0].Forecast)
	}
	st := d.metricsState()
	if p := st.Processes[0]; !p.HasOOMETA || p.OOMETA <= 0 || p.OOMETA > nearSeconds {
		t.Errorf("metrics: eta %.0f (%v)", p.OOMETA, p.HasOOMETA)
	}
	select {
	case w2 := <-got:
		t.Errorf("a second warning: %+v", w2)
	case <-time.After(300 * time.Millisecond):
	}
}
