package daemon

import (
	"container/list"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

// summaryCache is the name of the analysis kept on disk beside a snapshot, so
// a restarted daemon answers analysis.summary without decoding again.
const summaryCache = "summary.json"

// analyses caches finished analyses by snapshot id: the most recent few in
// memory (a Result keeps what flame graphs and diffs need), the summary on
// disk. Concurrent requests for one snapshot share one decode. The memory
// is bounded by count and by bytes (Result.Footprint): the analysis of a
// crafted snapshot of 300,000 distinct lines holds 210 MB, and the cache
// kept eight.
type analyses struct {
	st       *store.Store
	max      int
	maxBytes int64        // the most recent analysis is kept even when it alone weighs more
	runs     atomic.Int64 // decodes, for the test that a snapshot is decoded once
	// augment adds what only the daemon knows (NVML at capture time) to a
	// fresh analysis, before anyone sees it.
	augment func(id string, r *analyze.Result)
	// progress, when set (tests), is each decode's analyze.Options.Progress.
	progress func(done, total int64)
	logf     func(format string, args ...any) // the daemon's log, for panics

	pending sync.WaitGroup // summary caches being written

	mu      sync.Mutex
	entries map[string]*list.Element // of *analysisEntry
	lru     *list.List
	bytes   int64 // the Footprint of the finished analyses in entries
}

// maxCacheBytes bounds the analyses kept in memory: a few of real runs
// (gpt2_train's weighs 1.2 MB; a 12-layer model's tens), or one hostile
// snapshot's.
const maxCacheBytes = 512 << 20

type analysisEntry struct {
	id    string
	done  chan struct{}
	res   *analyze.Result
	err   error
	bytes int64 // res.Footprint(), counted in analyses.bytes
	// While the decode runs (under analyses.mu): the requests waiting for it,
	// and how to stop it once none is left (their clients cancelled or went).
	waiters int
	cancel  context.CancelFunc
	stopped bool
}

func newAnalyses(st *store.Store, max int, maxBytes int64, logf func(string, ...any)) *analyses {
	return &analyses{st: st, max: max, maxBytes: maxBytes, logf: logf, entries: map[string]*list.Element{}, lru: list.New()}
}

// compute analyses a file that is not (yet) in the store.
func (c *analyses) compute(path string) (*analyze.Result, error) {
	c.runs.Add(1)
	res, err := analyze.Run(path, analyze.Options{})
	analyze.LogPanic(c.logf, err)
	return res, err
}

// run analyses a stored snapshot and adds what the daemon knows. It runs
// on a goroutine of its own: a panic there would end the daemon, so it
// comes back as the analysis' error, and is logged with the file.
func (c *analyses) run(ctx context.Context, id string) (res *analyze.Result, err error) {
	path := c.st.Path(id)
	err = analyze.Guard(path, func() error {
		res, err = analyze.RunContext(ctx, path, analyze.Options{Progress: c.progress})
		if err == nil && c.augment != nil {
			c.augment(id, res)
		}
		return err
	})
	analyze.LogPanic(c.logf, err)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// put caches the analysis of a freshly committed snapshot.
func (c *analyses) put(id string, r *analyze.Result) {
	r.File = c.st.Path(id)
	if c.augment != nil {
		// This also runs on the goroutines that capture the ranks of a job: a
		// panic there would end the daemon. The snapshot is kept without what
		// augment adds.
		analyze.LogPanic(c.logf, analyze.Guard(r.File, func() error { c.augment(id, r); return nil }))
	}
	e := &analysisEntry{id: id, done: make(chan struct{}), res: r}
	close(e.done)
	c.mu.Lock()
	c.insert(e)
	c.weigh(e)
	c.mu.Unlock()
	// A cache for the next start, off the capture's path (it syncs a file).
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		c.writeSummary(id, r)
	}()
}

func (c *analyses) writeSummary(id string, r *analyze.Result) {
	if b, err := json.Marshal(r); err == nil {
		c.st.WriteCache(id, summaryCache, b) // a cache: failing to write it costs a decode later, nothing more
	}
	if b, err := json.Marshal(listFacts{PeakBytes: r.Peak.Bytes, OOMs: len(r.OOMs)}); err == nil {
		c.st.WriteCache(id, listCache, b)
	}
}

// listCache holds what snapshot.list shows of an analysis (its peak, its
// OOMs) in a few bytes, so that listing reads no summary.
const listCache = "list.json"

type listFacts struct {
	PeakBytes int64 `json:"peak_bytes"`
	OOMs      int   `json:"ooms"`
}

// insert adds e as most recent and evicts beyond max; c.mu is held.
func (c *analyses) insert(e *analysisEntry) {
	c.entries[e.id] = c.lru.PushFront(e)
	c.evict()
}

// weigh counts e's finished analysis in the bytes kept and evicts beyond
// maxBytes; c.mu is held.
func (c *analyses) weigh(e *analysisEntry) {
	if e.res == nil || e.bytes > 0 {
		return
	}
	if _, ok := c.entries[e.id]; !ok || c.entries[e.id].Value.(*analysisEntry) != e {
		return // evicted or replaced while it ran
	}
	e.bytes = e.res.Footprint()
	c.bytes += e.bytes
	c.evict()
}

// evict drops the least recently used analyses beyond max, and beyond
// maxBytes all but the most recent; c.mu is held.
func (c *analyses) evict() {
	for c.lru.Len() > c.max || c.lru.Len() > 1 && c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

// remove forgets an entry; c.mu is held.
func (c *analyses) remove(el *list.Element) {
	e := el.Value.(*analysisEntry)
	c.lru.Remove(el)
	delete(c.entries, e.id)
	c.bytes -= e.bytes
	e.bytes = 0
}

// get returns the analysis of a stored snapshot, decoding it at most once
// however many requests ask at the same time.
func (c *analyses) get(id string) (*analyze.Result, error) {
	return c.getContext(context.Background(), id)
}

// getContext is get for a request that may be cancelled, or whose client may
// go: it stops waiting when ctx ends, and the decode stops too once no request
// waits for it (a stopped decode is not cached; the next request starts anew).
func (c *analyses) getContext(ctx context.Context, id string) (*analyze.Result, error) {
	c.mu.Lock()
	e := c.lookup(id)
	if e == nil {
		e = c.start(id)
	}
	e.waiters++
	c.mu.Unlock()
	select {
	case <-e.done:
		c.mu.Lock()
		e.waiters--
		c.mu.Unlock()
		return e.res, e.err
	case <-ctx.Done():
		c.mu.Lock()
		e.waiters--
		if e.waiters == 0 && e.cancel != nil {
			e.stopped = true
			e.cancel()
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// lookup returns id's entry, finished or running, unless its decode was
// stopped (then it forgets it); c.mu is held.
func (c *analyses) lookup(id string) *analysisEntry {
	el, ok := c.entries[id]
	if !ok {
		return nil
	}
	e := el.Value.(*analysisEntry)
	if e.stopped {
		c.remove(el) // its goroutine finds it gone and caches nothing
		return nil
	}
	c.lru.MoveToFront(el)
	return e
}

// start decodes id on its own goroutine, so that the requests waiting for it
// can stop waiting; c.mu is held.
func (c *analyses) start(id string) *analysisEntry {
	ctx, cancel := context.WithCancel(context.Background())
	e := &analysisEntry{id: id, done: make(chan struct{}), cancel: cancel}
	c.insert(e)
	c.runs.Add(1)
	go func() {
		defer cancel()
		res, err := c.run(ctx, id)
		c.mu.Lock()
		e.res, e.err, e.cancel = res, err, nil
		if err == nil {
			e.stopped = false // it finished before the cancel reached it: keep it
			c.weigh(e)
		}
		c.mu.Unlock()
		close(e.done)
		if err != nil {
			c.dropEntry(e) // a failed analysis is not cached: the file may be fixed or deleted
		} else {
			c.writeSummary(id, res)
		}
	}()
	return e
}

// dropEntry forgets e, unless a newer analysis of its snapshot replaced it.
func (c *analyses) dropEntry(e *analysisEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.id]; ok && el.Value.(*analysisEntry) == e {
		c.remove(el)
	}
}

// drop forgets a snapshot (deleted, or removed by retention).
func (c *analyses) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		c.remove(el)
	}
}

// cached reports whether id's analysis is in memory (for tests and status).
func (c *analyses) cached(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[id]
	return ok
}

// result looks up a snapshot and its analysis for an analysis.* request.
func (s *session) result(ctx context.Context, id string) (*analyze.Result, error) {
	if _, err := s.d.lookup(id); err != nil {
		return nil, err
	}
	r, err := s.d.analyses.getContext(ctx, id)
	if ctx.Err() != nil {
		return nil, ctx.Err() // nobody reads the answer (the request was cancelled, or its client went)
	}
	if err != nil {
		return nil, fail(errBadSnapshot, "%v", err)
	}
	return r, nil
}

func (s *session) analysisSummary(ctx context.Context, p api.IDParams) (precomputed[analyze.Result], error) {
	if _, err := s.d.lookup(p.ID); err != nil {
		return nil, err
	}
	if !s.d.analyses.cached(p.ID) {
		if b, err := s.d.store.ReadCache(p.ID, summaryCache); err == nil && json.Valid(b) {
			return precomputed[analyze.Result](b), nil
		}
	}
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fail(errInternal, "%v", err)
	}
	return precomputed[analyze.Result](b), nil
}

func (s *session) analysisSites(ctx context.Context, p api.SitesParams) (api.SitesResult, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return api.SitesResult{}, err
	}
	res := api.SitesResult{File: p.File, PeakBytes: r.Peak.Bytes, Sites: []analyze.Site{}}
	for _, site := range r.Sites {
		if sameFile(site.File, p.File) {
			res.Sites = append(res.Sites, site)
		}
	}
	return res, nil
}

// sameFile matches a recorded path with a requested one exactly or, when the
// two are in different trees (a container, a remote box), by their common
// trailing components: at least the base name and its directory.
func sameFile(recorded, want string) bool {
	if recorded == "" || want == "" {
		return false
	}
	if recorded == want {
		return true
	}
	n := profiler.CommonSuffix(recorded, want)
	single := !strings.Contains(filepath.ToSlash(recorded), "/") || !strings.Contains(filepath.ToSlash(want), "/")
	return n >= 2 || (n == 1 && single)
}

func (s *session) analysisFlame(ctx context.Context, p api.FlameParams) (*flame.Tree, error) {
	w := flame.WeightPeak
	if p.Weight != "" {
		var ok bool
		if w, ok = flame.ParseWeight(p.Weight); !ok {
			return nil, fail(errInvalid, "unknown weight %q (peak, alloc or current)", p.Weight)
		}
	}
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return r.Flame(analyze.FlameOptions{Weight: w, KeepWrappers: p.KeepWrappers}), nil
}

// analysisReport answers Result.Report: what report.js draws beside the flame tree.
func (s *session) analysisReport(ctx context.Context, p api.IDParams) (analyze.Report, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return analyze.Report{}, err
	}
	return r.ReportData(), nil
}

func (s *session) analysisTimeline(ctx context.Context, p api.TimelineParams) (analyze.Timeline, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return analyze.Timeline{}, err
	}
	for _, d := range r.Devices {
		if d.Device == p.Device {
			return d.Timeline, nil
		}
	}
	return analyze.Timeline{}, fail(errNotFound, "snapshot %s has no trace for device %d", p.ID, p.Device)
}

func (s *session) analysisFindings(ctx context.Context, p api.IDParams) ([]analyze.Finding, error) {
	r, err := s.result(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if r.Findings == nil {
		return []analyze.Finding{}, nil
	}
	return r.Findings, nil
}

func (s *session) analysisDiff(ctx context.Context, p api.DiffParams) (*analyze.Diff, error) {
	a, err := s.result(ctx, p.A)
	if err != nil {
		return nil, err
	}
	b, err := s.result(ctx, p.B)
	if err != nil {
		return nil, err
	}
	return analyze.Compare(a, b), nil
}

func (s *session) analysisWhatIf(ctx context.Context, p api.WhatIfParams) (*analyze.WhatIf, error) {
	if len(p.Snapshots) < 2 {
		return nil, fail(errInvalid, "analysis.whatif wants two or more snapshots, each with its size")
	}
	opt := analyze.WhatIfOptions{Model: p.Model, DeviceMemory: p.DeviceMemory, Overhead: 1 << 30, Predict: p.Predict}
	if p.Overhead != nil {
		opt.Overhead = *p.Overhead
	}
	var pts []analyze.WhatIfPoint
	for _, sn := range p.Snapshots {
		r, err := s.result(ctx, sn.ID)
		if err != nil {
			return nil, err
		}
		pts = append(pts, analyze.WhatIfPointOf(r, sn.Size))
	}
	if opt.DeviceMemory == 0 {
		if m, err := s.d.lookup(p.Snapshots[0].ID); err == nil {
			opt.DeviceMemory = s.d.deviceTotal(m.Device)
		}
	}
	w, err := analyze.FitWhatIf(pts, opt)
	if err != nil {
		return nil, fail(errInvalid, "%v", err)
	}
	return w, nil
}
