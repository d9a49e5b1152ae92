package daemon

import (
	"sync"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/forecast"
)

// The warning before the card fills (issue #33): the memoryWarner projects,
// from each process's per-step levels, when its step peaks reach the memory
// it may use (profiler/forecast) and warns once when that is near.
//
// Near is within max(nearSeconds, nearSteps steps): 10 minutes leave time to
// act on a run whose steps are short, 50 steps on one whose steps are long.
// A warning fires once per growth. It re-arms only after a real change: the
// capacity changes, the run restarts (its step count goes back), or the
// growth stops, that is no sustained growth is seen over rearmSteps steps
// from rearmSteps after the warning on (a fix, or a cache that was bounded
// after all). docs/oom-warning.md.
const (
	nearSeconds = 600
	nearSteps   = 50
	rearmSteps  = 100
)

// memoryWarner keeps each process's latest projection and warning state.
type memoryWarner struct {
	params forecast.Params
	// fire is called once per growth, outside the lock, with the
	// projection that warned; it must not block.
	fire  func(pid int, f api.MemoryForecast)
	mu    sync.Mutex
	procs map[int]*warnState
}

// warnState is one process's projection and whether it has been warned of.
type warnState struct {
	forecast   *api.MemoryForecast // nil: no sustained growth now
	capacity   int64
	warned     bool
	warnedStep int // the last step seen when it warned
	quietFrom  int // the first step of the current stretch without growth after the warning (-1: none)
}

func newMemoryWarner(fire func(pid int, f api.MemoryForecast)) *memoryWarner {
	return &memoryWarner{params: forecast.Default(), fire: fire, procs: map[int]*warnState{}}
}

// Observe projects pid's levels (in step order; see ObserveLevels) against capBytes, the memory the process may use, at now, and
// warns when the projected full device is near.
func (w *memoryWarner) Observe(pid int, levels []forecast.Level, capBytes int64, now time.Time) {
	pr := forecast.Project(levels, capBytes, w.params)
	w.mu.Lock()
	st := w.procs[pid]
	if st == nil {
		st = &warnState{quietFrom: -1}
		w.procs[pid] = st
	}
	st.rearm(pr)
	st.capacity, st.forecast = capBytes, nil
	fire := false
	if pr.Growing {
		f := forecastOf(pr, now)
		if !st.warned && near(pr) {
			st.warned, st.warnedStep, fire = true, pr.LastStep, true
		}
		f.Warned = st.warned
		st.forecast = &f
	}
	var f api.MemoryForecast
	if fire {
		f = *st.forecast
	}
	w.mu.Unlock()
	if fire {
		w.fire(pid, f)
	}
}

// near says whether the projected full device is within max(nearSeconds,
// nearSteps steps).
func near(pr forecast.Projection) bool {
	return pr.StepsLeft <= nearSteps || (pr.SecondsLeft > 0 && pr.SecondsLeft <= nearSeconds)
}

// rearm clears a warning after a real change (see the constants).
func (st *warnState) rearm(pr forecast.Projection) {
	if !st.warned {
		return
	}
	switch {
	case pr.Capacity != st.capacity, pr.LastStep < st.warnedStep:
		st.warned, st.quietFrom = false, -1
	case pr.Growing:
		st.quietFrom = -1
	case pr.LastStep >= st.warnedStep+rearmSteps:
		if st.quietFrom < 0 {
			st.quietFrom = pr.LastStep
		}
		if pr.LastStep-st.quietFrom >= rearmSteps {
			st.warned, st.quietFrom = false, -1
		}
	}
}

// forget drops a process that has gone.
func (w *memoryWarner) forget(pid int) {
	w.mu.Lock()
	delete(w.procs, pid)
	w.mu.Unlock()
}

// forecast is pid's projection now, or nil when its peaks do not grow.
func (w *memoryWarner) forecast(pid int) *api.MemoryForecast {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.procs[pid]
	if st == nil || st.forecast == nil {
		return nil
	}
	f := *st.forecast
	return &f
}

// forecastOf is a projection on the wire, its time on the daemon's clock.
func forecastOf(pr forecast.Projection, now time.Time) api.MemoryForecast {
	ev := pr.Evidence
	f := api.MemoryForecast{Step: pr.LastStep, ProjectedStep: pr.Step, StepsLeft: pr.StepsLeft, SecondsLeft: pr.SecondsLeft,
		BytesPerStep: pr.BytesPerStep, BytesPerSecond: pr.BytesPerSecond, Capacity: pr.Capacity, Level: pr.Level,
		Evidence: api.GrowthEvidence{Series: ev.Series, FromStep: ev.FromStep, ToStep: ev.ToStep, Windows: ev.Windows, WindowSteps: ev.WindowSteps,
			Consistency: ev.Consistency, ThirdSlopes: ev.ThirdSlopes[:], Rise: ev.Rise, Noise: ev.Noise, CacheGap: ev.CacheGap}}
	if pr.BytesPerSecond > 0 { // the levels carry times (SecondsLeft may be 0: due now)
		f.ProjectedTime = now.Add(time.Duration(pr.SecondsLeft * float64(time.Second))).UTC()
	}
	return f
}
