package lsp

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// loaded is one analysed snapshot: the engine's result, the index of stacks
// by line, and the user sites grouped by recorded file.
type loaded struct {
	path   string
	done   chan struct{}
	err    error
	result *analyze.Result
	index  *analyze.SiteIndex
	byFile map[string][]analyze.Site // recorded file -> its user sites
	// The recorded source of each local file, as first read (recordedSource).
	srcMu   sync.Mutex
	sources map[string][]string
	checked map[string]bool // files checkRecorded looked at
	// Bytes read of the snapshot's decoding passes, while it is analysed ($/progress).
	read, total atomic.Int64
	// While it is analysed (under snapshots.mu): the requests waiting, and
	// how to stop the analysis once none is left.
	waiters int
	cancel  context.CancelFunc
	stopped bool
}

// snapshots analyses each snapshot file once, however many requests ask for
// it at the same time, and keeps the results for the session.
type snapshots struct {
	mu       sync.Mutex
	byPath   map[string]*loaded
	runs     int                     // analyses started, for the test that nothing is decoded twice
	progress func(done, total int64) // each analysis's Options.Progress (tests)
	logf     func(format string, args ...any)
}

func newSnapshots(logf func(string, ...any)) *snapshots {
	return &snapshots{byPath: map[string]*loaded{}, logf: logf}
}

// load analyses path once for the session (a request that may not be cancelled).
func (c *snapshots) load(path string) (*loaded, error) {
	return c.loadContext(context.Background(), path)
}

// loadContext is load for a request that may be cancelled or whose editor may
// close: it stops waiting when ctx ends, and the analysis stops too once no
// request waits for it (a stopped analysis is not kept).
func (c *snapshots) loadContext(ctx context.Context, path string) (*loaded, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	c.mu.Lock()
	l, ok := c.byPath[path]
	if !ok || l.stopped {
		l = c.start(path)
	}
	l.waiters++
	c.mu.Unlock()
	select {
	case <-l.done:
		c.mu.Lock()
		l.waiters--
		c.mu.Unlock()
		return l, l.err
	case <-ctx.Done():
		c.mu.Lock()
		l.waiters--
		if l.waiters == 0 && l.cancel != nil {
			l.stopped = true
			l.cancel()
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// running is the analysis of path under way or done, nil when none was
// started or it was stopped; it starts nothing.
func (c *snapshots) running(path string) *loaded {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.byPath[path]; ok && !l.stopped {
		return l
	}
	return nil
}

// start analyses path on its own goroutine; c.mu is held.
func (c *snapshots) start(path string) *loaded {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loaded{path: path, done: make(chan struct{}), cancel: cancel}
	c.byPath[path] = l
	c.runs++
	go func() {
		defer cancel()
		progress := func(done, total int64) {
			l.read.Store(done)
			l.total.Store(total)
			if c.progress != nil {
				c.progress(done, total)
			}
		}
		// A panic on this goroutine would end the server: it becomes the
		// snapshot's error, which the requests waiting for it answer with.
		if err := analyze.Guard(path, func() error { l.analyse(ctx, progress); return nil }); err != nil {
			l.result, l.err = nil, err
		}
		analyze.LogPanic(c.logf, l.err)
		c.mu.Lock()
		l.cancel = nil
		if l.err == nil {
			l.stopped = false // it finished before the cancel reached it: keep it
		}
		if l.err != nil && c.byPath[path] == l {
			delete(c.byPath, path) // not cached: the file may be fixed
		}
		c.mu.Unlock()
		close(l.done)
	}()
	return l
}

func (l *loaded) analyse(ctx context.Context, progress func(done, total int64)) {
	l.result, l.err = analyze.RunContext(ctx, l.path, analyze.Options{Progress: progress})
	if l.err != nil {
		return
	}
	l.index = l.result.IndexSites()
	l.byFile = map[string][]analyze.Site{}
	for _, s := range l.result.Sites {
		if s.Kind == "user" && s.File != "" {
			l.byFile[s.File] = append(l.byFile[s.File], s)
		}
	}
}

// nextShow numbers a request to show the snapshot at path, in the order
// they came, and makes it the one shownOrPending waits for. It runs when the
// request comes, before the goroutine that reads the snapshot starts.
func (s *Server) nextShow(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.showAsks++
	s.pending = path
	return s.showAsks
}

// shownOrPending is the snapshot shown or, while none is shown yet, the one
// asked for last once its analysis ends (the editor asks for the flame graph
// while the snapshot it opened with is still being read); nil when none was
// asked for, it failed, or ctx ended first.
func (s *Server) shownOrPending(ctx context.Context) *loaded {
	if l := s.shown(); l != nil {
		return l
	}
	path := s.pendingPath()
	if path == "" {
		return nil
	}
	l, err := s.snaps.loadContext(ctx, path)
	if err != nil {
		return nil
	}
	if cur := s.shown(); cur != nil {
		return cur
	}
	return l
}

// pendingPath is the snapshot asked for last ("" when none).
func (s *Server) pendingPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// awaitShown is the snapshot shown or, while none is shown yet, the one
// asked for last once the analysis already under way ends; nil when none is
// under way, it failed, or ctx ended first. Unlike shownOrPending it neither
// starts an analysis nor counts as one of its waiters, so a request that is
// cancelled (an editor drops stale hint requests) never stops it.
func (s *Server) awaitShown(ctx context.Context) *loaded {
	if l := s.shown(); l != nil {
		return l
	}
	path := s.pendingPath()
	l := s.snaps.running(path)
	if path == "" || l == nil {
		return nil
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil
	}
	if cur := s.shown(); cur != nil {
		return cur
	}
	if l.err != nil {
		return nil
	}
	return l
}

// showAsked shows l for show request n unless a newer request was shown
// already (its analysis finished first); false when it is not shown.
func (s *Server) showAsked(l *loaded, n int64) bool {
	s.mu.Lock()
	if n < s.shownAsk {
		s.mu.Unlock()
		return false
	}
	s.shownAsk = n
	s.current = l
	s.mu.Unlock()
	s.redraw()
	return true
}

// redraw asks the editor for hints and lenses again (when it said it takes
// the refresh requests) and republishes the diagnostics of the snapshot shown.
func (s *Server) redraw() {
	caps := s.caps()
	if caps.inlayHintRefresh {
		s.ask(methodInlayHintRefresh)
	}
	if caps.codeLensRefresh {
		s.ask(methodCodeLensRefresh)
	}
	s.publishDiagnostics()
}

func (s *Server) shown() *loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

func (s *Server) currentSettings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings
}
