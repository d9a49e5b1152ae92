package analyze

import (
	"sort"
	"strings"
)

// SiteDelta is how one site changed between two snapshots.
type SiteDelta struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Function string `json:"function"`
	Kind     string `json:"kind"`
	Status   string `json:"status"` // "changed", "new", "gone" or "same"
	// Changed names the measures that differ, in this order: "peak",
	// "current", "allocated" (bytes) and "allocs" (count); empty when same.
	Changed      []string `json:"changed,omitempty"`
	PeakBefore   int64    `json:"peak_before"`
	PeakAfter    int64    `json:"peak_after"`
	PeakDelta    int64    `json:"peak_delta"`
	CurrentDelta int64    `json:"current_delta"`
	AllocDelta   int64    `json:"alloc_delta"`
	AllocsDelta  int64    `json:"allocs_delta"`
}

// Diff compares two analyses site by site.
type Diff struct {
	Before    string      `json:"before"`
	After     string      `json:"after"`
	PeakDelta int64       `json:"peak_delta"`
	PeakA     int64       `json:"peak_before"`
	PeakB     int64       `json:"peak_after"`
	Sites     []SiteDelta `json:"sites"`
	New       int         `json:"new_sites"`
	Gone      int         `json:"gone_sites"`
	// OOMBefore and OOMAfter are each side's first out-of-memory event: a
	// run that failed never allocated what it asked for, so its peak alone
	// understates what it needed.
	OOMBefore *OOM `json:"oom_before,omitempty"`
	OOMAfter  *OOM `json:"oom_after,omitempty"`
}

// Compare reports per-site deltas from a to b, largest change in peak first.
func Compare(a, b *Result) *Diff {
	d := &Diff{Before: a.File, After: b.File, PeakA: a.Peak.Bytes, PeakB: b.Peak.Bytes, PeakDelta: b.Peak.Bytes - a.Peak.Bytes}
	if len(a.OOMs) > 0 {
		d.OOMBefore = &a.OOMs[0]
	}
	if len(b.OOMs) > 0 {
		d.OOMAfter = &b.OOMs[0]
	}
	key := func(s Site) siteKey { return siteKey{file: s.File, fn: phaseKey(s), line: s.Line, kind: s.Kind} }
	before := map[siteKey]Site{}
	for _, s := range a.Sites {
		before[key(s)] = s
	}
	seen := map[siteKey]bool{}
	for _, s := range b.Sites {
		k := key(s)
		seen[k] = true
		old, ok := before[k]
		sd := delta(old, s)
		if !ok {
			sd.Status = "new"
			d.New++
		}
		d.Sites = append(d.Sites, sd)
	}
	for _, s := range a.Sites {
		if !seen[key(s)] {
			sd := delta(s, Site{File: s.File, Line: s.Line, Function: s.Function, Kind: s.Kind})
			sd.Status = "gone"
			d.Gone++
			d.Sites = append(d.Sites, sd)
		}
	}
	sort.SliceStable(d.Sites, func(i, j int) bool {
		x, y := abs(d.Sites[i].PeakDelta), abs(d.Sites[j].PeakDelta)
		if x != y {
			return x > y
		}
		return abs(d.Sites[i].AllocDelta) > abs(d.Sites[j].AllocDelta)
	})
	return d
}

func delta(a, b Site) SiteDelta {
	sd := SiteDelta{File: b.File, Line: b.Line, Function: b.Function, Kind: b.Kind, PeakBefore: a.PeakBytes,
		PeakAfter: b.PeakBytes, PeakDelta: b.PeakBytes - a.PeakBytes, CurrentDelta: b.CurrentBytes - a.CurrentBytes,
		AllocDelta: b.AllocBytes - a.AllocBytes, AllocsDelta: b.Allocs - a.Allocs, Status: "changed"}
	for _, m := range []struct {
		name  string
		delta int64
	}{{"peak", sd.PeakDelta}, {"current", sd.CurrentDelta}, {"allocated", sd.AllocDelta}, {"allocs", sd.AllocsDelta}} {
		if m.delta != 0 {
			sd.Changed = append(sd.Changed, m.name)
		}
	}
	if len(sd.Changed) == 0 {
		sd.Status = "same"
	}
	return sd
}

// Label is the status as a reader wants it: "new", "gone", "same", or for a
// changed site the measures that changed ("peak, allocated").
func (sd SiteDelta) Label() string {
	if sd.Status != "changed" {
		return sd.Status
	}
	return strings.Join(sd.Changed, ", ")
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// phaseKey identifies a phase by its window between user lines, not by the
// record_function scope that happened to be open (two runs of the same script
// can annotate differently), so the same backward pass matches across snapshots.
func phaseKey(s Site) string {
	if s.Kind != "phase" || s.Window == "" {
		return s.Function
	}
	return s.Window
}
