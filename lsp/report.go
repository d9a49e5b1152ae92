package lsp

// report.go answers vramscope/report, a custom request (beside LSP's own
// methods, like rust-analyzer's lsp_ext): the data of the linked report
// (analyze's Result.Report: timeline, moments, top lines, findings) of the
// snapshot shown, with file names mapped to local ones like the flame tree's,
// for the flame-graph webview's report.js.

import (
	"context"
	"encoding/json"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// command.Report takes {} and answers analyze's Result.Report (local
// paths); command.DiffReport takes {a, b} (snapshot files, before and after)
// and answers analyze.DiffReport: b's report with a's timeline and the
// per-line diff, for the compare webview's overlaid timelines.
func init() {
	register(command.Report, (*Server).report, true)
	register(command.DiffReport, (*Server).diffReport, true)
}

func (s *Server) diffReport(_ context.Context, raw json.RawMessage) (any, error) {
	var p command.CompareArgs
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if p.A == "" || p.B == "" {
		return nil, invalid("diffReport needs a and b")
	}
	la, err := s.snaps.load(s.inWorkspace(p.A))
	if err != nil {
		return nil, invalid(err.Error())
	}
	lb, err := s.snaps.load(s.inWorkspace(p.B))
	if err != nil {
		return nil, invalid(err.Error())
	}
	b, err := analyze.DiffReport(la.result, lb.result)
	if err != nil {
		return nil, failed(err.Error())
	}
	return s.localReport(b)
}

func (s *Server) report(ctx context.Context, _ json.RawMessage) (any, error) {
	l := s.shownOrPending(ctx)
	if l == nil {
		return nil, invalid("no snapshot is open")
	}
	b, err := l.result.Report()
	if err != nil {
		return nil, failed(err.Error())
	}
	return s.localReport(b)
}

// localReport decodes a report and maps its files to local ones.
func (s *Server) localReport(b []byte) (any, error) {
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, failed(err.Error())
	}
	s.localizeReport(rep)
	return rep, nil
}

// localizeReport maps every file the report names: its top lines, findings
// (and their evidence lines), OOMs and the frames of its moments.
func (s *Server) localizeReport(rep map[string]any) {
	local := func(m map[string]any, key string) {
		if f, ok := m[key].(string); ok && f != "" {
			m[key] = s.paths.local(f)
		}
	}
	sites := rep["sites"]
	if d, ok := rep["diff"].(map[string]any); ok {
		sites = append(objectsAny(sites), objectsAny(d["sites"])...)
	}
	for _, list := range []any{sites, rep["findings"], rep["ooms"]} {
		for _, x := range objects(list) {
			local(x, "file")
			if ev, ok := x["evidence"].(map[string]any); ok {
				for _, line := range objects(ev["lines"]) {
					local(line, "file")
				}
			}
		}
	}
	if m, ok := rep["moments"].(map[string]any); ok {
		for _, f := range objects(m["frames"]) {
			local(f, "f")
		}
	}
}

func objectsAny(v any) []any {
	list, _ := v.([]any)
	return list
}

// objects are the JSON objects of a decoded array (nil for anything else).
func objects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
