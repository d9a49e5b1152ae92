package analyze

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// Step is one training (or inference) step of a device trace. Steps end where
// an optimizer step ends: at PyTorch's own Optimizer.step# annotation when the
// snapshot has it, otherwise where the periodic pattern of the trace puts the
// gap between two iterations (see periodicSteps).
type Step struct {
	Index            int   `json:"index"`
	StartUS          int64 `json:"start_us"`
	EndUS            int64 `json:"end_us"`
	LiveBytesAtStart int64 `json:"live_bytes_at_start"`
	LiveBytesAtEnd   int64 `json:"live_bytes_at_end"`
	PeakBytes        int64 `json:"peak_bytes"` // highest allocated during the step
}

// Step sources.
const (
	StepsFromAnnotations = "annotations" // Optimizer.step#... END markers
	StepsFromPeriodicity = "periodicity" // the repeating allocation pattern
)

// window is an annotated scope on one device, [start, end].
type window struct {
	name       string
	start, end int64
}

// stepWindows lists the Optimizer.step# scopes of one device, in time order.
// With several optimizers (a GAN), the one that steps most often sets the
// steps; ties go to the first one seen.
func stepWindows(anns []profiler.Annotation, dev int) []window {
	open := map[string]int64{}
	byName := map[string][]window{}
	var order []string
	for _, a := range anns {
		if a.Device != dev || !isStepMarker(a.Name) {
			continue
		}
		if a.Start {
			open[a.Name] = a.TimeUS
			continue
		}
		start, ok := open[a.Name]
		if !ok {
			start = a.TimeUS // its START fell before the trace
		}
		delete(open, a.Name)
		if _, seen := byName[a.Name]; !seen {
			order = append(order, a.Name)
		}
		byName[a.Name] = append(byName[a.Name], window{name: a.Name, start: start, end: a.TimeUS})
	}
	var best []window
	for _, n := range order {
		if len(byName[n]) > len(best) {
			best = byName[n]
		}
	}
	sort.Slice(best, func(i, j int) bool { return best[i].end < best[j].end })
	return best
}

// levels reads the level log of one device: allocated bytes over time.
type levels struct {
	log  *levelLog
	base int64 // bytes allocated before the trace and still counted (Device.PreTraceBytes)
	t0   int64 // the trace's first event
}

// time is when entry i happened.
func (l levels) time(i int) int64 { return l.t0 + int64(l.log.at(i).t) }

// idx is the index of the last entry at or before t; -1 if none.
func (l levels) idx(t int64) int {
	if t < l.t0 {
		return -1 // before the trace (and no overflow for math.MinInt64)
	}
	return l.log.search(t - l.t0)
}

// at is the allocated bytes at time t.
func (l levels) at(t int64) int64 {
	if i := l.idx(t); i >= 0 {
		return l.base + l.log.at(i).cur
	}
	return l.base
}

// peakIn is the highest level in (from, to].
func (l levels) peakIn(from, to int64) int64 {
	best := l.at(from)
	for i := l.idx(from) + 1; i < l.log.len() && l.time(i) <= to; i++ {
		best = max(best, l.base+l.log.at(i).cur)
	}
	return best
}

// stepsFrom turns step end times into steps. Steps that ended before the
// trace's first event are left out and counted (their levels were never
// recorded); the first step inside the trace starts no earlier than the trace.
func (l levels) stepsFrom(ends []int64) (out []Step, before int) {
	start := l.t0
	for _, end := range ends {
		if end < l.t0 {
			before++
			continue
		}
		out = append(out, Step{Index: len(out), StartUS: start, EndUS: end, LiveBytesAtStart: l.at(start),
			LiveBytesAtEnd: l.at(end), PeakBytes: l.peakIn(start, end)})
		start = end
	}
	return out, before
}

// findSteps returns the steps of one device, where they came from, and how
// many annotated steps ended before the trace began.
func findSteps(lv levels, opt []window, truncated bool) ([]Step, string, int) {
	if len(opt) > 0 {
		var ends []int64
		for _, w := range opt {
			// Past the end of a truncated log the levels are unknown.
			if truncated && lv.log.len() > 0 && w.end > lv.time(lv.log.len()-1) {
				break
			}
			ends = append(ends, w.end)
		}
		steps, before := lv.stepsFrom(ends)
		if len(steps) == 0 {
			return []Step{}, "", before
		}
		return steps, StepsFromAnnotations, before
	}
	if idx := periodicSteps(lv.log); len(idx) >= 2 {
		ends := make([]int64, len(idx))
		for i, j := range idx {
			ends[i] = lv.time(j)
		}
		steps, _ := lv.stepsFrom(ends)
		return steps, StepsFromPeriodicity, 0
	}
	return []Step{}, "", 0
}
