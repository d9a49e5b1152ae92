package lsp

// report.go answers vramscope/report, a custom request (beside LSP's own
// methods, like rust-analyzer's lsp_ext): the data of the linked report
// (analyze's Result.Report: timeline, moments, top lines, findings) of the
// snapshot shown, with file names mapped to local ones like the flame tree's,
// for the flame-graph webview's report.js.

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// command.Report takes {} and answers analyze's Result.Report (local
// paths); command.DiffReport takes {a, b} (snapshot files, before and after)
// and answers analyze.DiffReport: b's report with a's timeline and the
// per-line diff, for the compare webview's overlaid timelines.
func init() {
	registerRequest(command.Report, (*Server).report)
	registerRequest(command.DiffReport, (*Server).diffReport)
}

// requestTypes are the params and result types of each custom request's
// handler (a test checks them against lsp/command's table).
var requestTypes = map[string][2]reflect.Type{}

// registerRequest registers a custom request whose params are a P and result
// an R; it runs on its own goroutine (an analysis may take a while).
func registerRequest[P, R any](method string, f func(*Server, context.Context, P) (R, error)) {
	requestTypes[method] = [2]reflect.Type{reflect.TypeFor[P](), reflect.TypeFor[R]()}
	register(method, func(s *Server, ctx context.Context, raw json.RawMessage) (any, error) {
		var p P
		if err := decode(raw, &p); err != nil {
			return nil, err
		}
		r, err := f(s, ctx, p)
		if err != nil {
			return nil, err
		}
		return r, nil
	}, true)
}

func (s *Server) diffReport(_ context.Context, p command.CompareArgs) (analyze.CompareReport, error) {
	var rep analyze.CompareReport
	if p.A == "" || p.B == "" {
		return rep, invalid("diffReport needs a and b")
	}
	la, err := s.snaps.load(s.inWorkspace(p.A))
	if err != nil {
		return rep, invalid(err.Error())
	}
	lb, err := s.snaps.load(s.inWorkspace(p.B))
	if err != nil {
		return rep, invalid(err.Error())
	}
	b, err := analyze.DiffReport(la.result, lb.result)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return rep, failed(err.Error())
	}
	s.localizeReport(&rep.Report)
	s.localizeDiff(&rep.Diff)
	return rep, nil
}

func (s *Server) report(ctx context.Context, _ command.NoArgs) (analyze.Report, error) {
	l := s.shownOrPending(ctx)
	if l == nil {
		return analyze.Report{}, invalid("no snapshot is open")
	}
	return s.localReport(l.result)
}

// localReport is r's report with the editor's file names. It is decoded from
// its JSON: a copy, so that the shared result keeps the recorded names.
func (s *Server) localReport(r *analyze.Result) (analyze.Report, error) {
	var rep analyze.Report
	b, err := r.Report()
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return rep, failed(err.Error())
	}
	s.localizeReport(&rep)
	return rep, nil
}

// localizeReport maps every file the report names: its top lines, findings
// (and their evidence lines), OOMs and the frames of its moments.
func (s *Server) localizeReport(rep *analyze.Report) {
	for i := range rep.Sites {
		s.localFile(&rep.Sites[i].File)
	}
	for i := range rep.Findings {
		f := &rep.Findings[i]
		s.localFile(&f.File)
		for j := range f.Evidence.Lines {
			s.localFile(&f.Evidence.Lines[j].File)
		}
	}
	for i := range rep.OOMs {
		s.localFile(&rep.OOMs[i].File)
	}
	if m := rep.Moments; m != nil {
		for i := range m.Frames {
			s.localFile(&m.Frames[i].F)
		}
	}
}

// localizeDiff maps the files of a diff's lines.
func (s *Server) localizeDiff(d *analyze.Diff) {
	for i := range d.Sites {
		s.localFile(&d.Sites[i].File)
	}
}

// localFile maps a recorded file name to the editor's, in place.
func (s *Server) localFile(f *string) {
	if *f != "" {
		*f = s.paths.local(*f)
	}
}
