package lsp

// progress.go shows an analysis in the editor ($/progress): a 50M-entry
// snapshot takes about 11 s to its first hints, and nothing moved meanwhile.

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// progressEvery is how often a running analysis reports: often enough to
// see it move, rarely enough to cost nothing beside the decoding.
const progressEvery = 250 * time.Millisecond

var progressTokens atomic.Int64

// analysisProgress shows the analysis of path as work-done progress when the
// client takes it (window.workDoneProgress) and the snapshot is not analysed
// yet; the function it returns ends it with a last message.
func (s *Server) analysisProgress(path string) func(msg string) {
	if !s.caps().workDoneProgress || s.snaps.ready(path) {
		return func(string) {}
	}
	token := fmt.Sprintf("vramscope/analysis/%d", progressTokens.Add(1))
	done, last := make(chan struct{}), ""
	var once sync.Once
	go s.reportProgress(token, path, done, &last)
	return func(msg string) {
		once.Do(func() { last = msg; close(done) })
	}
}

// reportProgress creates the token (the client must agree before $/progress
// may use it), then reports the bytes read until done.
func (s *Server) reportProgress(token, path string, done chan struct{}, last *string) {
	c := s.client()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.lifeContext(), 10*time.Second)
	err := c.Call(ctx, "window/workDoneProgress/create", map[string]any{"token": token}, nil)
	cancel()
	if err != nil {
		return // refused, or the editor went away: no progress
	}
	send := func(v map[string]any) { s.notify("$/progress", map[string]any{"token": token, "value": v}) }
	name := filepath.Base(path)
	send(map[string]any{"kind": "begin", "title": "vramscope", "message": "reading " + name, "percentage": 0})
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			send(map[string]any{"kind": "end", "message": *last})
			return
		case <-tick.C:
			if pct, ok := s.snaps.percent(path); ok {
				send(map[string]any{"kind": "report", "message": fmt.Sprintf("reading %s: %d%%", name, pct), "percentage": pct})
			}
		}
	}
}

// ready says whether path is analysed already (no progress to show).
func (c *snapshots) ready(path string) bool {
	l := c.find(path)
	if l == nil {
		return false
	}
	select {
	case <-l.done:
		return l.err == nil
	default:
		return false
	}
}

// percent is how far the analysis of path has read.
func (c *snapshots) percent(path string) (int, bool) {
	l := c.find(path)
	if l == nil || l.total.Load() <= 0 {
		return 0, false
	}
	return int(min(100, 100*l.read.Load()/l.total.Load())), true
}

func (c *snapshots) find(path string) *loaded {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byPath[path]
}
