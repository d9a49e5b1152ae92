package lsp

import (
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// The daemon's memory_warning: a process whose memory is projected to fill
// its device soon. The editor gets a window/showMessage and, when the
// snapshot the daemon took at the warning names the growing line, a warning
// diagnostic on that line (beside the shown snapshot's findings), kept until
// a newer warning for the same process replaces it.

// warningDiag is one warning's diagnostic and the file it belongs to.
type warningDiag struct {
	uri  string
	diag protocol.Diagnostic
}

func (s *Server) onMemoryWarning(ev api.MemoryWarning) {
	s.showMessage(msgWarning, warningMessage(ev))
	var wd *warningDiag
	if g := ev.Growing; g != nil {
		wd = &warningDiag{uri: string(uri.File(s.paths.local(g.File))), diag: protocol.Diagnostic{
			Range:    lineRange(g.Line),
			Severity: protocol.DiagnosticSeverityWarning,
			Code:     "memory_warning",
			Source:   "vramscope",
			Message:  warningDiagMessage(ev),
		}}
	}
	s.mu.Lock()
	if s.warnings == nil {
		s.warnings = map[int]warningDiag{}
	}
	delete(s.warnings, ev.PID)
	if wd != nil {
		s.warnings[ev.PID] = *wd
	}
	s.mu.Unlock()
	s.publishDiagnostics()
}

// warningDiagnostics are the diagnostics of the warnings received, by URI.
func (s *Server) warningDiagnostics() map[string][]protocol.Diagnostic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]protocol.Diagnostic{}
	for _, w := range s.warnings {
		out[w.uri] = append(out[w.uri], w.diag)
	}
	return out
}

// warningMessage says who will run out, when, how fast memory grows, and
// what names the growth.
func warningMessage(ev api.MemoryWarning) string {
	f := ev.Forecast
	msg := fmt.Sprintf("vramscope: pid %d will run out of GPU memory: its memory grows %s/step%s and fills its %s at step %d, %s",
		ev.PID, profiler.FormatBytes(int64(f.BytesPerStep)), perSecond(f), profiler.FormatBytes(f.Capacity), f.ProjectedStep, whenLeft(f))
	switch {
	case ev.Snapshot != nil && ev.Growing != nil:
		msg += fmt.Sprintf(". Snapshot %s names the growth: %s:%d (%s)", ev.Snapshot.ID, ev.Growing.File, ev.Growing.Line, ev.Growing.Title)
	case ev.Snapshot != nil:
		msg += fmt.Sprintf(". Snapshot %s taken", ev.Snapshot.ID)
	case ev.SnapshotError != "":
		msg += ". No snapshot: " + ev.SnapshotError
	}
	return msg
}

func warningDiagMessage(ev api.MemoryWarning) string {
	f := ev.Forecast
	return fmt.Sprintf("Memory grows here: pid %d grows %s/step and fills its %s at step %d, %s.\n%s",
		ev.PID, profiler.FormatBytes(int64(f.BytesPerStep)), profiler.FormatBytes(f.Capacity), f.ProjectedStep, whenLeft(f), ev.Growing.Title)
}

func perSecond(f api.MemoryForecast) string {
	if f.BytesPerSecond <= 0 {
		return ""
	}
	return " (" + profiler.FormatBytes(int64(f.BytesPerSecond)) + "/s)"
}

// whenLeft is how far off the full device is: time and steps, or steps.
func whenLeft(f api.MemoryForecast) string {
	if f.BytesPerSecond <= 0 { // the levels carry no times
		return fmt.Sprintf("in %d steps", f.StepsLeft)
	}
	return fmt.Sprintf("in %s (%d steps)", (time.Duration(f.SecondsLeft) * time.Second).String(), f.StepsLeft)
}
