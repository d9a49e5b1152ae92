package lsp

// report.go answers vramscope/report, a custom request (beside LSP's own
// methods, like rust-analyzer's lsp_ext): the data of the linked report
// (analyze's Result.Report: timeline, moments, top lines, findings) of the
// snapshot shown, with file names mapped to local ones like the flame tree's,
// for the flame-graph webview's report.js.

import (
	"context"
	"encoding/json"
)

// methodReport takes {} and answers analyze's Result.Report (local paths).
const methodReport = "vramscope/report"

func init() { register(methodReport, (*Server).report, true) }

func (s *Server) report(_ context.Context, _ json.RawMessage) (any, error) {
	l := s.shown()
	if l == nil {
		return nil, invalid("no snapshot is open")
	}
	b, err := l.result.Report()
	if err != nil {
		return nil, failed(err.Error())
	}
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
	for _, k := range []string{"sites", "findings", "ooms"} {
		for _, x := range objects(rep[k]) {
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
