package lsp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// Async: for an editor that takes no workspace/inlayHint/refresh (Helix
// 25.01), a request that comes while the snapshot it opened with is still
// being analysed waits for that analysis, so the hints show without an edit.
func init() { register("textDocument/inlayHint", (*Server).inlayHint, true) }

// inlayHint puts each memory-holding line's figure at its end, and "GPU
// idle 31% here" at the end of the lines a process's training thread was on
// while its GPU idled (idle.go). Lines holding
// less than hintThreshold of the peak (or of all bytes allocated, with the
// alloc weight) stay quiet; a file the snapshot does not know gets none. The
// recorded lines are mapped through the user's edits (lineMap): a deleted
// line has no hint, an edited one says its figures are from before the edit.
func (s *Server) inlayHint(ctx context.Context, raw json.RawMessage) (any, error) {
	var p InlayHintParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	hints := []InlayHint{}
	l := s.shown()
	if l == nil && !s.caps().inlayHintRefresh {
		l = s.awaitShown(ctx)
	}
	d := s.document(p.TextDocument.URI)
	if d == nil {
		return hints, nil
	}
	hints = append(hints, s.idleHints(d, p.Range)...) // where a live process's GPU idles (idle.go)
	if l == nil {
		return hints, nil
	}
	st := s.currentSettings()
	sites := s.paths.sitesIn(l, d.path)
	m := s.lineMap(d, l)
	type placed struct {
		line   int
		edited bool
		site   analyze.Site
	}
	var at []placed
	total := totalAlloc(l)
	for recorded, site := range sites {
		line, edited, ok := s.toCurrent(m, recorded)
		if ok && loud(site, st, total) && uint32(line-1) >= p.Range.Start.Line && uint32(line-1) <= p.Range.End.Line {
			at = append(at, placed{line, edited, site})
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].line < at[j].line })
	for _, x := range at {
		pos, ok := d.endOf(x.line)
		if !ok {
			continue
		}
		label, tip := hintLabel(x.site, st.Weight), "vramscope: "+filepath.Base(l.path)
		if x.edited {
			label += beforeEdit
			tip += "; the figures are from before this line was edited"
		}
		hints = append(hints, InlayHint{Position: pos, Label: label, PaddingLeft: true, Tooltip: tip})
	}
	return hints, nil
}

// beforeEdit marks the figures of a line the user changed since the
// snapshot: they describe the line as it was.
const beforeEdit = " (before edit)"

// loud says whether a line holds enough to be shown.
func loud(site analyze.Site, st Settings, totalAlloc int64) bool {
	if st.Weight == "alloc" {
		return totalAlloc > 0 && float64(site.AllocBytes) >= st.HintThreshold*float64(totalAlloc) && site.AllocBytes > 0
	}
	return site.PeakBytes > 0 && site.PeakShare >= st.HintThreshold
}

func totalAlloc(l *loaded) int64 {
	var n int64
	for _, s := range l.result.Sites {
		n += s.AllocBytes
	}
	return n
}
