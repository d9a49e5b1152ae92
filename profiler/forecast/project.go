package forecast

import (
	"fmt"
	"math"
	"strings"
)

// trend is a span's fitted growth.
type trend struct {
	slope, intercept float64
	from, to         Level
	ev               Evidence
}

// Project says when the trend of levels' step peaks reaches capacity, or
// why it projects nothing. levels are in step order; where the step count
// goes back (a restarted run), only the levels after it count.
func Project(levels []Level, capacity int64, p Params) Projection {
	levels = lastRun(levels)
	out := Projection{Capacity: capacity}
	if len(levels) == 0 || capacity <= 0 {
		out.Why = "no levels or no capacity"
		return out
	}
	last := levels[len(levels)-1]
	out.LastStep, out.LastTimeS = last.Step, last.TimeS
	usable := afterWarmup(levels, p)
	t, why := p.longestTrend(usable, capacity)
	if why != "" {
		out.Why = why
		return out
	}
	return t.project(out, p)
}

// longestTrend is the sustained growth of the first series that shows one
// (allSeries), or why none does.
func (p Params) longestTrend(usable []Level, capacity int64) (trend, string) {
	if n := stepsIn(usable); n < p.Spans[0] {
		return trend{}, fmt.Sprintf("%d steps after warm-up, fewer than %d", n, p.Spans[0])
	}
	var why []string
	for _, s := range allSeries {
		t, reason := p.longestIn(usable, capacity, s)
		if reason == "" {
			return t, ""
		}
		why = append(why, s.name+": "+reason)
	}
	return trend{}, strings.Join(why, "; ")
}

// longestIn is the longest of the spans whose series s shows sustained
// growth, provided its most recent span still rises.
func (p Params) longestIn(usable []Level, capacity int64, s series) (trend, string) {
	var best trend
	why := ""
	found := false
	for _, n := range p.Spans {
		if n > stepsIn(usable) {
			break
		}
		t, reason := p.fit(lastSteps(usable, n), capacity, s)
		if reason != "" {
			if !found {
				why = reason
			}
			continue
		}
		best, found = t, true
	}
	if !found {
		return trend{}, why
	}
	last := lastSteps(usable, p.Spans[0])
	recent := windowMaxima(last, p.windowSize(stepsIn(last)), s)
	if r, _ := theilSen(recent); r < p.MinThirdShare*best.slope {
		return trend{}, fmt.Sprintf("the last %d steps rise %.0f B/step, under %.0f%% of the trend's %.0f", p.Spans[0], r, 100*p.MinThirdShare, best.slope)
	}
	return best, ""
}

// stepsIn is how many steps levels span. The spans count steps, not levels:
// the agent leaves steps unmeasured when reading the allocator would cost
// more than its budget, and a span of 200 levels then took some 330 steps on
// the H200 (the leak under the agent was first projected at step 388 where
// its own every-step levels are projected at 259).
func stepsIn(levels []Level) int {
	if len(levels) == 0 {
		return 0
	}
	return levels[len(levels)-1].Step - levels[0].Step + 1
}

// lastSteps is the levels of the last n steps.
func lastSteps(levels []Level, n int) []Level {
	from := levels[len(levels)-1].Step - n + 1
	for i, l := range levels {
		if l.Step >= from {
			return levels[i:]
		}
	}
	return nil
}

// project extrapolates the trend from the last level to the capacity less
// the allocator's cache beyond the peak (cacheGap).
func (t trend) project(out Projection, p Params) Projection {
	level := t.slope*float64(out.LastStep) + t.intercept
	out.Level = int64(level)
	left := math.Ceil((float64(out.Capacity-t.ev.CacheGap) - level) / t.slope)
	spanSteps := float64(t.to.Step - t.from.Step)
	if left > p.MaxExtrapolation*spanSteps {
		out.Why = fmt.Sprintf("full in %.0f steps, more than %.0f times the %.0f steps of evidence", left, p.MaxExtrapolation, spanSteps)
		return out
	}
	out.Growing = true
	out.StepsLeft = max(int(left), 0)
	out.Step = out.LastStep + out.StepsLeft
	out.BytesPerStep = t.slope
	out.Evidence = t.ev
	if dt := t.to.TimeS - t.from.TimeS; dt > 0 && spanSteps > 0 {
		perStep := dt / spanSteps
		out.BytesPerSecond = t.slope / perStep
		out.SecondsLeft = float64(out.StepsLeft) * perStep
		out.TimeS = out.LastTimeS + out.SecondsLeft
	}
	return out
}

// afterWarmup is the levels from step max(WarmupSteps, WarmupShare of the
// last step) on. Steps count from the run's start, so a caller may pass only
// the most recent levels (the last max(Spans) steps are all Project reads).
func afterWarmup(levels []Level, p Params) []Level {
	warm := max(p.WarmupSteps, int(p.WarmupShare*float64(levels[len(levels)-1].Step)))
	for i, l := range levels {
		if l.Step >= warm {
			return levels[i:]
		}
	}
	return nil
}

// lastRun is the levels after the last place where the step count goes back.
func lastRun(levels []Level) []Level {
	for i := len(levels) - 1; i > 0; i-- {
		if levels[i].Step <= levels[i-1].Step {
			return levels[i:]
		}
	}
	return levels
}
