package cli

import (
	"fmt"
	"io"
	"math"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/gpuphase"
	"github.com/vramscope/vramscope/profiler/idle"
)

// classifyCounters splits a counter recording (vramscope counters --json, the
// daemon's counters.series, or nvidia-smi dmon text) into classified phases,
// and, with stack samples (the recording's idle line, or idlePath), adds
// the idle finding by line over the whole and over each phase.
func classifyCounters(path string, totalGiB float64, asJSON bool, idlePath string, stdout, stderr io.Writer) int {
	samples, err := gpuphase.ReadFile(path, totalGiB*1024)
	if err != nil {
		return fail(stderr, inputError{err})
	}
	phases := gpuphase.Phases(samples)
	in, source, err := recordedStacks(path, idlePath)
	if err != nil {
		return fail(stderr, inputError{err})
	}
	var ci *countersIdle
	if in != nil {
		j := joinCounters(*in, samples, phases)
		j.Result.Input = nil
		ci = &j
	}
	if asJSON {
		out := countersReport{File: path, Samples: len(samples), Phases: phases}
		if ci != nil {
			out.Idle, out.IdleByPhase = &ci.Result, ci.ByPhase
		}
		return printJSON(stdout, stderr, out)
	}
	fmt.Fprintf(stdout, "%s: %d samples, %d phases\n", path, len(samples), len(phases))
	if ci == nil {
		writePhases(stdout, phases, nil)
		return exitOK
	}
	writePhases(stdout, phases, ci.ByPhase)
	writeCountersIdle(terminal(stdout), ci, source)
	return exitOK
}

// countersReport is `vramscope counters FILE --json`.
type countersReport struct {
	File        string           `json:"file"`
	Samples     int              `json:"samples"`
	Phases      []gpuphase.Phase `json:"phases"`
	Idle        *api.IdleResult  `json:"idle,omitempty"`          // with stack samples: the idle finding by line
	IdleByPhase []phaseIdle      `json:"idle_by_phase,omitempty"` // and over each phase of the process's GPU
}

// recordedStacks are the stack samples a counters report joins: idlePath's
// (a `vramscope idle --json --raw` answer or a join's input), else the
// recording's own idle line; none is no error.
func recordedStacks(path, idlePath string) (*idle.Input, string, error) {
	if idlePath != "" {
		in, err := readIdleInput(idlePath)
		if err != nil {
			return nil, "", err
		}
		return &in, "from " + idlePath, nil
	}
	in, err := idleInRecording(path)
	return in, "from the recording", err
}

func num(v *float64, format string) string {
	if v == nil || math.IsNaN(*v) {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}
