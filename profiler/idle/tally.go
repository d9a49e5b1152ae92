package idle

import (
	"sort"
)

// tally adds up idle time by cause, by the cause's line, and by the line the
// thread was on.
type tally struct {
	wallMS, idleMS, copyMS float64
	fromMS, toMS           int64
	windows                int
	kinds                  map[Kind]*kindTally
}

type kindTally struct {
	ms      float64
	sites   map[Frame]float64 // the line to fix
	lines   map[Frame]float64 // where the thread was
	workers bool              // a DataLoader with worker processes
}

func newTally() *tally { return &tally{kinds: map[Kind]*kindTally{}} }

func (t *tally) window(w window) {
	if t.windows == 0 {
		t.fromMS = w.fromMS
	}
	t.windows++
	t.toMS = w.toMS
	t.wallMS += float64(w.toMS - w.fromMS)
	t.idleMS += w.idleMS
	if w.copyOnly {
		t.copyMS += float64(w.toMS - w.fromMS)
	}
}

func (t *tally) add(k Kind, site, line Frame, ms float64, workers bool) {
	kt := t.kinds[k]
	if kt == nil {
		kt = &kindTally{sites: map[Frame]float64{}, lines: map[Frame]float64{}}
		t.kinds[k] = kt
	}
	kt.ms += ms
	kt.sites[site] += ms
	kt.lines[line] += ms
	kt.workers = kt.workers || workers
}

// ranked lists a map's frames by time, largest first (ties by file and line).
func ranked(m map[Frame]float64, wallMS float64, n int) []Site {
	out := make([]Site, 0, len(m))
	for f, ms := range m {
		out = append(out, Site{Frame: f, IdleMS: ms, Share: share(ms, wallMS)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IdleMS != out[j].IdleMS {
			return out[i].IdleMS > out[j].IdleMS
		}
		return less(out[i].Frame, out[j].Frame)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func share(ms, wallMS float64) float64 {
	if wallMS <= 0 {
		return 0
	}
	return ms / wallMS
}
