package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler"
	"go.lsp.dev/protocol"
)

func init() { register("textDocument/codeLens", (*Server).codeLens, false) }

// codeLens puts "Take snapshot" and "Flame graph from here" above each function
// of the file that holds memory in the shown snapshot, or "Take snapshot" at
// the top of a Python file when none does. The function's recorded lines are
// mapped through the user's edits before its def is looked for above them.
func (s *Server) codeLens(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.CodeLensParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	lenses := []protocol.CodeLens{}
	d := s.document(p.TextDocument.URI)
	if d == nil {
		return lenses, nil
	}
	l, st := s.shown(), s.currentSettings()
	type fn struct {
		name, recorded string
		first          int
		peak           int64
		share          float64
	}
	byName := map[string]*fn{}
	var m *lineMap
	if l != nil {
		m = s.lineMap(d, l)
	}
	for recorded, site := range s.paths.sitesIn(l, d.path) {
		line, _, ok := s.toCurrent(m, recorded)
		if !ok {
			line = len(d.lines) // deleted: look for its def from the end
		}
		f := byName[site.Function]
		if f == nil {
			f = &fn{name: site.Function, recorded: site.File, first: line}
			byName[site.Function] = f
		}
		f.first = min(f.first, line)
		f.peak += site.PeakBytes
		f.share += site.PeakShare
	}
	var fns []*fn
	for _, f := range byName {
		if f.share >= st.HintThreshold && f.peak > 0 {
			fns = append(fns, f)
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].first < fns[j].first })
	for _, f := range fns {
		line := defLine(d, f.name, f.first)
		r := protocol.Range{Start: protocol.Position{Line: uint32(line)}, End: protocol.Position{Line: uint32(line)}}
		lenses = append(lenses,
			protocol.CodeLens{Range: r, Command: &protocol.Command{Title: fmt.Sprintf("vramscope: %s at peak · take snapshot", profiler.FormatBytes(f.peak)), Command: command.TakeSnapshot}},
			protocol.CodeLens{Range: r, Command: &protocol.Command{Title: "flame graph from here", Command: command.FlameGraph,
				Arguments: []any{map[string]any{"file": f.recorded, "function": f.name}}}})
	}
	if len(lenses) == 0 && strings.HasSuffix(d.path, ".py") {
		r := protocol.Range{}
		lenses = append(lenses, protocol.CodeLens{Range: r, Command: &protocol.Command{Title: "vramscope: take snapshot", Command: command.TakeSnapshot}})
	}
	return lenses, nil
}

// defLine finds the 0-based line of `def name` at or above the function's
// first line that holds memory; 0 (the top) when there is none (module code).
func defLine(d *document, name string, first int) int {
	if name == "" || name == "<module>" {
		return 0
	}
	re, err := regexp.Compile(`^\s*(async\s+)?def\s+` + regexp.QuoteMeta(name) + `\s*\(`)
	if err != nil {
		return 0
	}
	for i := min(first-1, len(d.lines)-1); i >= 0; i-- {
		if re.MatchString(d.lines[i]) {
			return i
		}
	}
	return 0
}
