package daemon

import (
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/forecast"
)

// forecastTail is how many of a process's kept steps the warner reads: the
// forecast's longest span (3,200 levels, forecast.Default) and room for the
// steps whose allocator the agent did not read.
const forecastTail = 4000

// onStepLevels is called with a process's new step levels whenever they
// arrive (agent.levels, or with a snapshot), in step order within one call,
// after they are kept; capBytes is the memory the process may use (its
// memory-fraction cap, else its device's total; 0 unknown). It runs on the
// agent's request goroutine: it must be quick and must not block. The
// warner projects from the last forecastTail kept steps, not only the new
// ones (docs/oom-warning.md).
func (d *Daemon) onStepLevels(pid int, _ []api.StepLevel, capBytes int64) {
	pl := d.levels.of(pid, false)
	if pl == nil {
		return
	}
	pl.mu.Lock()
	levels := forecastLevels(pl.steps, forecastTail)
	pl.mu.Unlock()
	d.ObserveLevels(pid, levels, capBytes)
}

// forecastLevels are the last n steps as the forecast reads them
// (analyze.ForecastLevels).
func forecastLevels(steps []api.StepLevel, n int) []forecast.Level {
	return analyze.ForecastLevels(RoadSteps(steps[max(0, len(steps)-n):]))
}
