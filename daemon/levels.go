package daemon

// levels.go: each agent's per-step memory levels (agent.levels, and the
// steps not sent yet that ride on agent.dump's answer and agent.captured),
// kept per process (at most maxLevels steps), joined with NVML's memory of
// the process, and stored beside every snapshot of it (levelsCache), where
// the analysis reads them back as the snapshot's road (analyze.SetRoad).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

const (
	// maxLevels bounds the steps kept per process, as the agent's ring does
	// (about 200 bytes each in memory with their input shapes: 20 MB a process).
	maxLevels = 100_000
	// levelsCache is the snapshot's levels in its store cache directory
	// (gzip'd JSON of api.LevelsParams: ~20 bytes a step): not a cache
	// that can be recomputed, but it lives and goes with the snapshot.
	levelsCache = "levels.json.gz"
	// nvmlJoinMS is how far before a step's end an NVML sample may be to
	// stand for it (the sampler runs at 10 Hz).
	nvmlJoinMS = 1000
)

// procLevels are one process's steps, by step number.
type procLevels struct {
	mu      sync.Mutex
	steps   []api.StepLevel
	device  int
	cap     int64
	dropped int64
}

// add merges steps in (notifications may arrive out of order; a step sent
// twice, after a reconnect, replaces the first) and drops the oldest past maxLevels.
func (p *procLevels) add(in []api.StepLevel) {
	for _, l := range in {
		n := len(p.steps)
		if n == 0 || l.Step > p.steps[n-1].Step {
			p.steps = append(p.steps, l)
			continue
		}
		i := sort.Search(n, func(i int) bool { return p.steps[i].Step >= l.Step })
		if i < n && p.steps[i].Step == l.Step {
			p.steps[i] = l
			continue
		}
		p.steps = append(p.steps, api.StepLevel{})
		copy(p.steps[i+1:], p.steps[i:])
		p.steps[i] = l
	}
	if n := len(p.steps); n > maxLevels+maxLevels/4 {
		p.steps = append([]api.StepLevel(nil), p.steps[n-maxLevels:]...)
	}
}

// params is a copy of what is kept (the last maxLevels steps) up to
// untilMS (a snapshot's time: the steps after it are not its road).
func (p *procLevels) params(untilMS int64) api.LevelsParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.steps[max(0, len(p.steps)-maxLevels):]
	for len(s) > 0 && s[len(s)-1].UnixMS > untilMS {
		s = s[:len(s)-1]
	}
	return api.LevelsParams{Device: p.device, Cap: p.cap, Dropped: p.dropped, Levels: append([]api.StepLevel(nil), s...)}
}

// levelStore holds the levels of every process with an agent, by pid.
type levelStore struct {
	mu    sync.Mutex
	byPID map[int]*procLevels
}

func newLevelStore() *levelStore { return &levelStore{byPID: map[int]*procLevels{}} }

func (l *levelStore) of(pid int, create bool) *procLevels {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.byPID[pid]
	if p == nil && create {
		p = &procLevels{}
		l.byPID[pid] = p
	}
	return p
}

func (l *levelStore) forget(pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byPID, pid)
}

func (s *session) agentLevels(_ context.Context, p api.LevelsParams) error {
	a, err := s.currentAgent()
	if err != nil {
		return err
	}
	s.d.addLevels(a, &p)
	return nil
}

// addLevels keeps steps an agent measured (from agent.levels or with a
// snapshot), joined with NVML, and calls onStepLevels with them.
func (d *Daemon) addLevels(a *agent, p *api.LevelsParams) {
	if p == nil || len(p.Levels) == 0 {
		return
	}
	pid := a.process().PID
	dev, mapped := a.nvmlOf(p.Device)
	if d.counters != nil {
		d.joinNVML(pid, dev, mapped, p.Levels)
	}
	pl := d.levels.of(pid, true)
	pl.mu.Lock()
	pl.device, pl.dropped = dev, max(pl.dropped, p.Dropped)
	if p.Cap > 0 {
		pl.cap = p.Cap
	} else if pl.cap <= 0 {
		pl.cap = d.deviceTotal(dev)
	}
	pl.add(p.Levels)
	capBytes := pl.cap
	pl.mu.Unlock()
	d.onStepLevels(pid, p.Levels, capBytes)
}

// joinNVML sets each step's NVMLBytes: the process's memory in NVML's
// newest sample at most nvmlJoinMS before the step's end (on its device,
// when the agent's device is mapped to NVML's; else on all of them).
func (d *Daemon) joinNVML(pid, dev int, mapped bool, levels []api.StepLevel) {
	lo, hi := levels[0].UnixMS, levels[0].UnixMS
	for _, l := range levels {
		lo, hi = min(lo, l.UnixMS), max(hi, l.UnixMS)
	}
	var times []int64
	used := map[int64]int64{}
	for _, s := range d.counters.col.ProcessSeries(uint32(pid), lo-nvmlJoinMS, hi+1, 0) {
		if !s.Has(counters.ProcUsed) || (mapped && s.Device != dev) {
			continue
		}
		if _, ok := used[s.TimeMS]; !ok {
			times = append(times, s.TimeMS)
		}
		used[s.TimeMS] += int64(s.UsedBytes)
	}
	if len(times) == 0 {
		return
	}
	for i := range levels {
		t := levels[i].UnixMS
		k := sort.Search(len(times), func(k int) bool { return times[k] > t }) - 1
		if k >= 0 && t-times[k] <= nvmlJoinMS {
			levels[i].NVMLBytes = used[times[k]]
		}
	}
}

// storeLevels writes the levels of snapshot m's process up to its commit
// beside it. The steps its agent had not sent yet came with the snapshot
// and were added (addLevels) before the commit, whose analysis already
// read them (roadOf).
func (d *Daemon) storeLevels(m store.Meta) {
	p, ok := d.liveLevels(m)
	if !ok {
		return
	}
	id := m.ID
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(p); err != nil || zw.Close() != nil {
		return
	}
	if err := d.store.WriteCache(id, levelsCache, buf.Bytes()); err != nil {
		d.cfg.Logf("snapshot %s: its %d step levels not stored: %v", id, len(p.Levels), err)
	}
}

// readLevels reads snapshot id's levels; ok is false when it has none.
func (d *Daemon) readLevels(id string) (api.LevelsParams, bool, error) {
	b, err := d.store.ReadCache(id, levelsCache)
	if err != nil {
		return api.LevelsParams{}, false, nil // none stored: a snapshot without an agent's levels
	}
	p, err := decodeLevels(bytes.NewReader(b))
	if err != nil {
		return api.LevelsParams{}, false, fmt.Errorf("snapshot %s: %s: %w", id, levelsCache, err)
	}
	return p, true, nil
}

func decodeLevels(r io.Reader) (api.LevelsParams, error) {
	var p api.LevelsParams
	zr, err := gzip.NewReader(r)
	if err != nil {
		return p, err
	}
	defer zr.Close()
	err = json.NewDecoder(io.LimitReader(zr, 1<<30)).Decode(&p)
	return p, err
}

// liveLevels are the levels kept for snapshot m's process, up to its commit.
func (d *Daemon) liveLevels(m store.Meta) (api.LevelsParams, bool) {
	if m.PID <= 0 || m.Reason == "import" {
		return api.LevelsParams{}, false
	}
	pl := d.levels.of(m.PID, false)
	if pl == nil {
		return api.LevelsParams{}, false
	}
	p := pl.params(m.Created.UnixMilli())
	return p, len(p.Levels) > 0
}

// roadOf gives the analysis of snapshot m its road: the levels stored
// with it, or (while it is being committed) those kept for its process.
func (d *Daemon) roadOf(m store.Meta, r *analyze.Result) {
	p, ok, err := d.readLevels(m.ID)
	if err != nil {
		d.cfg.Logf("%v", err)
	}
	if !ok {
		if p, ok = d.liveLevels(m); !ok {
			return
		}
	}
	r.SetRoad(RoadSteps(p.Levels), p.Cap)
}

// RoadSteps converts the wire's steps to the engine's.
func RoadSteps(levels []api.StepLevel) []analyze.RoadStep {
	out := make([]analyze.RoadStep, len(levels))
	for i, l := range levels {
		out[i] = analyze.RoadStep(l)
	}
	return out
}
