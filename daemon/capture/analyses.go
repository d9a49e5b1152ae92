package capture

import (
	"container/list"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// SummaryCache is the name of the analysis kept on disk beside a snapshot, so
// a restarted daemon answers analysis.summary without decoding again.
const SummaryCache = "summary.json"

// Analyses caches finished analyses by snapshot id: the most recent few in
// memory (a Result keeps what flame graphs and diffs need), the summary on
// disk. Concurrent requests for one snapshot share one decode. The memory
// is bounded by count and by bytes (Result.Footprint): the analysis of a
// crafted snapshot of 300,000 distinct lines holds 210 MB, and the cache
// kept eight.
type Analyses struct {
	st       *store.Store
	max      int
	maxBytes int64        // the most recent analysis is kept even when it alone weighs more
	runs     atomic.Int64 // decodes, for the test that a snapshot is decoded once
	// Augment adds what only the daemon knows (NVML at capture time) to a
	// fresh analysis, before anyone sees it.
	Augment func(id string, r *analyze.Result)
	// progress, when set (tests), is each decode's analyze.Options.Progress.
	progress func(done, total int64)
	logf     func(format string, args ...any) // the daemon's log, for panics

	pending sync.WaitGroup // summary caches being written

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	lru     *list.List
	bytes   int64 // the Footprint of the finished analyses in entries
}

// MaxCacheBytes bounds the analyses kept in memory: a few of real runs
// (gpt2_train's weighs 1.2 MB; a 12-layer model's tens), or one hostile
// snapshot's.
const MaxCacheBytes = 512 << 20

type entry struct {
	id    string
	done  chan struct{}
	res   *analyze.Result
	err   error
	bytes int64 // res.Footprint(), counted in Analyses.bytes
	// While the decode runs (under Analyses.mu): the requests waiting for it,
	// and how to stop it once none is left (their clients cancelled or went).
	waiters int
	cancel  context.CancelFunc
	stopped bool
}

// NewAnalyses is a cache of at most max analyses and maxBytes (but the most
// recent) over st; logf logs the panics of decodes.
func NewAnalyses(st *store.Store, max int, maxBytes int64, logf func(string, ...any)) *Analyses {
	return &Analyses{st: st, max: max, maxBytes: maxBytes, logf: logf, entries: map[string]*list.Element{}, lru: list.New()}
}

// CountDecode counts a decode made outside the cache (a streamed capture's):
// Runs counts every decode of a snapshot.
func (c *Analyses) CountDecode() { c.runs.Add(1) }

// Runs is how many snapshots were decoded, for the tests that one is decoded
// once.
func (c *Analyses) Runs() int64 { return c.runs.Load() }

// Wait waits for the summary caches being written (the daemon's Close, before
// the store closes).
func (c *Analyses) Wait() { c.pending.Wait() }

// Compute analyses a file that is not (yet) in the store.
func (c *Analyses) Compute(path string) (*analyze.Result, error) {
	c.runs.Add(1)
	res, err := analyze.Run(path, analyze.Options{})
	analyze.LogPanic(c.logf, err)
	return res, err
}

// run analyses a stored snapshot and adds what the daemon knows. It runs
// on a goroutine of its own: a panic there would end the daemon, so it
// comes back as the analysis' error, and is logged with the file.
func (c *Analyses) run(ctx context.Context, id string) (res *analyze.Result, err error) {
	path := c.st.Path(id)
	err = analyze.Guard(path, func() error {
		res, err = analyze.RunContext(ctx, path, analyze.Options{Progress: c.progress})
		if err == nil && c.Augment != nil {
			c.Augment(id, res)
		}
		return err
	})
	analyze.LogPanic(c.logf, err)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Put caches the analysis of a freshly committed snapshot.
func (c *Analyses) Put(id string, r *analyze.Result) {
	r.File = c.st.Path(id)
	if c.Augment != nil {
		// This also runs on the goroutines that capture the ranks of a job: a
		// panic there would end the daemon. The snapshot is kept without what
		// Augment adds.
		analyze.LogPanic(c.logf, analyze.Guard(r.File, func() error { c.Augment(id, r); return nil }))
	}
	e := &entry{id: id, done: make(chan struct{}), res: r}
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

func (c *Analyses) writeSummary(id string, r *analyze.Result) {
	if b, err := json.Marshal(r); err == nil {
		c.st.WriteCache(id, SummaryCache, b) // a cache: failing to write it costs a decode later, nothing more
	}
	if b, err := json.Marshal(ListFacts{PeakBytes: r.Peak.Bytes, OOMs: len(r.OOMs)}); err == nil {
		c.st.WriteCache(id, ListCache, b)
	}
}

// ListCache holds what snapshot.list shows of an analysis (its peak, its
// OOMs) in a few bytes, so that listing reads no summary.
const ListCache = "list.json"

// ListFacts is what ListCache holds.
type ListFacts struct {
	PeakBytes int64 `json:"peak_bytes"`
	OOMs      int   `json:"ooms"`
}

// insert adds e as most recent and evicts beyond max; c.mu is held.
func (c *Analyses) insert(e *entry) {
	c.entries[e.id] = c.lru.PushFront(e)
	c.evict()
}

// weigh counts e's finished analysis in the bytes kept and evicts beyond
// maxBytes; c.mu is held.
func (c *Analyses) weigh(e *entry) {
	if e.res == nil || e.bytes > 0 {
		return
	}
	if _, ok := c.entries[e.id]; !ok || c.entries[e.id].Value.(*entry) != e {
		return // evicted or replaced while it ran
	}
	e.bytes = e.res.Footprint()
	c.bytes += e.bytes
	c.evict()
}

// evict drops the least recently used analyses beyond max, and beyond
// maxBytes all but the most recent; c.mu is held.
func (c *Analyses) evict() {
	for c.lru.Len() > c.max || c.lru.Len() > 1 && c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

// remove forgets an entry; c.mu is held.
func (c *Analyses) remove(el *list.Element) {
	e := el.Value.(*entry)
	c.lru.Remove(el)
	delete(c.entries, e.id)
	c.bytes -= e.bytes
	e.bytes = 0
}

// Get returns the analysis of a stored snapshot, decoding it at most once
// however many requests ask at the same time.
func (c *Analyses) Get(id string) (*analyze.Result, error) {
	return c.GetContext(context.Background(), id)
}

// GetContext is Get for a request that may be cancelled, or whose client may
// go: it stops waiting when ctx ends, and the decode stops too once no request
// waits for it (a stopped decode is not cached; the next request starts anew).
func (c *Analyses) GetContext(ctx context.Context, id string) (*analyze.Result, error) {
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
func (c *Analyses) lookup(id string) *entry {
	el, ok := c.entries[id]
	if !ok {
		return nil
	}
	e := el.Value.(*entry)
	if e.stopped {
		c.remove(el) // its goroutine finds it gone and caches nothing
		return nil
	}
	c.lru.MoveToFront(el)
	return e
}

// start decodes id on its own goroutine, so that the requests waiting for it
// can stop waiting; c.mu is held.
func (c *Analyses) start(id string) *entry {
	ctx, cancel := context.WithCancel(context.Background())
	e := &entry{id: id, done: make(chan struct{}), cancel: cancel}
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
func (c *Analyses) dropEntry(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.id]; ok && el.Value.(*entry) == e {
		c.remove(el)
	}
}

// Drop forgets a snapshot (deleted, or removed by retention).
func (c *Analyses) Drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		c.remove(el)
	}
}

// Cached reports whether id's analysis is in memory (for tests and status).
func (c *Analyses) Cached(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[id]
	return ok
}

// Peek is a cached analysis, or nil; it never decodes.
func (c *Analyses) Peek(id string) *analyze.Result {
	c.mu.Lock()
	el, ok := c.entries[id]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	e := el.Value.(*entry)
	select {
	case <-e.done:
		return e.res
	default:
		return nil
	}
}
