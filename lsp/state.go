package lsp

import (
	"path/filepath"
	"sync"

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
}

// snapshots analyses each snapshot file once, however many requests ask for
// it at the same time, and keeps the results for the session.
type snapshots struct {
	mu     sync.Mutex
	byPath map[string]*loaded
	runs   int // analyses started, for the test that nothing is decoded twice
}

func newSnapshots() *snapshots { return &snapshots{byPath: map[string]*loaded{}} }

func (c *snapshots) load(path string) (*loaded, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	c.mu.Lock()
	l, ok := c.byPath[path]
	if !ok {
		l = &loaded{path: path, done: make(chan struct{})}
		c.byPath[path] = l
		c.runs++
	}
	c.mu.Unlock()
	if ok {
		<-l.done
		return l, l.err
	}
	l.result, l.err = analyze.Run(path, analyze.Options{})
	if l.err == nil {
		l.index = l.result.IndexSites()
		l.byFile = map[string][]analyze.Site{}
		for _, s := range l.result.Sites {
			if s.Kind == "user" && s.File != "" {
				l.byFile[s.File] = append(l.byFile[s.File], s)
			}
		}
	} else {
		c.mu.Lock()
		delete(c.byPath, path) // not cached: the file may be fixed
		c.mu.Unlock()
	}
	close(l.done)
	return l, l.err
}

// show makes a loaded snapshot the one the editor shows and refreshes the
// client: hints, lenses and diagnostics.
func (s *Server) show(l *loaded) {
	s.mu.Lock()
	s.current = l
	s.mu.Unlock()
	s.ask(methodInlayHintRefresh)
	s.ask(methodCodeLensRefresh)
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
