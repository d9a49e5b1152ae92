package lsp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"

	"github.com/vramscope/vramscope/profiler/analyze"
)

func init() { register("textDocument/inlayHint", (*Server).inlayHint, false) }

// inlayHint puts each memory-holding line's figure at its end. Lines holding
// less than hintThreshold of the peak (or of all bytes allocated, with the
// alloc weight) stay quiet; a file the snapshot does not know gets none.
func (s *Server) inlayHint(_ context.Context, raw json.RawMessage) (any, error) {
	var p InlayHintParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	hints := []InlayHint{}
	d, l := s.document(p.TextDocument.URI), s.shown()
	if d == nil || l == nil {
		return hints, nil
	}
	st := s.currentSettings()
	sites := s.paths.sitesIn(l, d.path)
	lines := make([]int, 0, len(sites))
	for line := range sites {
		lines = append(lines, line)
	}
	sort.Ints(lines)
	total := totalAlloc(l)
	for _, line := range lines {
		if uint32(line-1) < p.Range.Start.Line || uint32(line-1) > p.Range.End.Line {
			continue
		}
		site := sites[line]
		if !loud(site, st, total) {
			continue
		}
		pos, ok := d.endOf(line)
		if !ok {
			continue
		}
		hints = append(hints, InlayHint{Position: pos, Label: hintLabel(site, st.Weight), PaddingLeft: true,
			Tooltip: "vramscope: " + filepath.Base(l.path)})
	}
	return hints, nil
}

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
