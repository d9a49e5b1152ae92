package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/forecast"
)

// What the daemon does when the memoryWarner warns: it takes a snapshot of
// the process at once through snapshot.take's path (reason "warning", so
// the growth is named while the job still lives), then sends one
// memory_warning event with the projection, the snapshot and the line the
// snapshot's analysis finds growing.

// ObserveLevels hands the warner a process's per-step levels (in step
// order, steps counted from the run's start: the whole run as far as it is
// kept, or its last 3,200 levels at least, all that forecast.Project reads)
// and the memory it may use: its device's total, or its memory-fraction cap. The agent's per-step levels
// arrive through it; tests feed it directly.
func (d *Daemon) ObserveLevels(pid int, levels []forecast.Level, capBytes int64) {
	d.warner.Observe(pid, levels, capBytes, time.Now())
}

// memoryWarning is the warner's fire: the snapshot and the event, off the
// caller's goroutine.
func (d *Daemon) memoryWarning(pid int, f api.MemoryForecast) {
	d.cfg.Logf("memory warning: pid %d grows %s/step; full (%s) at step %d, in %d steps, %.0f s",
		pid, profiler.FormatBytes(int64(f.BytesPerStep)), profiler.FormatBytes(f.Capacity), f.ProjectedStep, f.StepsLeft, f.SecondsLeft)
	go func() {
		w := api.MemoryWarning{PID: pid, Forecast: f}
		d.warningSnapshot(&w)
		d.events.publish(api.EventMemoryWarning, w)
	}()
}

// warningSnapshot takes the warning's snapshot and names the growing line,
// or says in w why there is no snapshot.
func (d *Daemon) warningSnapshot(w *api.MemoryWarning) {
	a, timeout, err := d.takeTarget(w.PID, 0)
	if err != nil {
		w.SnapshotError = err.Error()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	label := fmt.Sprintf("memory warning: +%s/step, full at step %d", profiler.FormatBytes(int64(w.Forecast.BytesPerStep)), w.Forecast.ProjectedStep)
	c, err := d.capture(ctx, a, captureReq{label: label, reason: "warning", timeout: timeout})
	if err != nil {
		w.SnapshotError = err.Error()
		return
	}
	r := d.snapshotResult(c.meta)
	w.Snapshot = &r
	w.Growing = growingLine(d.analyses.Peek(c.meta.ID))
}

// growthKinds are the findings that name a line whose memory grows.
var growthKinds = []string{analyze.KindMemoryGrowth, analyze.KindLeak, analyze.KindLoopAccumulation, analyze.KindCacheGrowth, analyze.KindUnboundedCache}

// growingLine is the first growth finding of res that names a line.
func growingLine(res *analyze.Result) *api.GrowingLine {
	if res == nil {
		return nil
	}
	for _, kind := range growthKinds {
		for _, f := range res.Findings {
			if f.Kind == kind && f.File != "" && f.Line > 0 {
				return &api.GrowingLine{File: f.File, Line: f.Line, Bytes: findingBytes(f), Kind: f.Kind, Title: f.Title}
			}
		}
	}
	return nil
}

// findingBytes is the bytes a finding's evidence gives its own line.
func findingBytes(f analyze.Finding) int64 {
	for _, l := range f.Evidence.Lines {
		if l.File == f.File && l.Line == f.Line {
			return l.Bytes
		}
	}
	return 0
}
