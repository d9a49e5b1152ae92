// counters_idle.go: the counters report's idle finding. The phases say how a
// GPU was used (input_starved, …); a process's stack samples say where its
// training thread was meanwhile. With stack samples — asked of the daemon
// (`counters --pid N`), carried by a recording (its {"idle": …} line, which
// `counters --json --pid N` writes), or given as `--idle FILE` (`vramscope
// idle --json --raw`) — the report joins them with its own utilisation
// readings (profiler/idle) over the whole report and over each phase of the
// process's GPU.

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"time"

	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/gpuphase"
	"github.com/vramscope/vramscope/profiler/idle"
)

// phaseIdle is the idle finding over one phase of the process's GPU.
type phaseIdle struct {
	Device    int            `json:"device"`
	Start     int64          `json:"start"` // the phase's, unix ms
	End       int64          `json:"end"`
	Class     string         `json:"class"`
	IdleShare float64        `json:"idle_share"`         // of the phase's windows
	Headline  string         `json:"headline,omitempty"` // the finding; empty: no idle worth one
	Cause     *api.IdleCause `json:"cause,omitempty"`    // its top cause, with the lines and the fix
}

// countersIdle is what the report adds: the join over the whole report (its
// input kept, so a recording can be joined again) and over each phase.
type countersIdle struct {
	Result  api.IdleResult
	ByPhase []phaseIdle
}

// joinCounters joins in's samples with the report's readings of in's GPU
// (in's own readings when the report has none of that GPU).
func joinCounters(in idle.Input, ss []gpuphase.Sample, phases []gpuphase.Phase) countersIdle {
	if u := utilOf(ss, in.Device); len(u) > 0 {
		in.Util = u
	}
	r := idle.Join(in, idle.Options{})
	out := countersIdle{Result: daemon.IdleResultOf(&r), ByPhase: []phaseIdle{}}
	out.Result.Input = &in
	if r.WallMS == 0 {
		out.Result.Note = "no utilisation readings of GPU " + fmt.Sprint(in.Device) + " while the stack samples were taken"
	}
	for _, p := range phases {
		if p.Device != in.Device {
			continue
		}
		pr := idle.Join(in.Span(p.Start, p.End), idle.Options{})
		if pr.WallMS == 0 {
			continue
		}
		pi := phaseIdle{Device: p.Device, Start: p.Start, End: p.End, Class: p.Class, IdleShare: pr.IdleShare, Headline: pr.Headline()}
		if pi.Headline != "" {
			res := daemon.IdleResultOf(&pr)
			pi.Cause = &res.Causes[0]
		}
		out.ByPhase = append(out.ByPhase, pi)
	}
	return out
}

// utilOf is a counter recording's utilisation of device dev, as the join
// reads it (no data: -1), in time order.
func utilOf(ss []gpuphase.Sample, dev int) []idle.Util {
	or := func(v float64) float64 {
		if math.IsNaN(v) {
			return -1
		}
		return v
	}
	var out []idle.Util
	for _, s := range ss {
		if s.Device != dev || math.IsNaN(s.UtilGPU) {
			continue
		}
		pcie := -1.0
		if !math.IsNaN(s.RxMBps) || !math.IsNaN(s.TxMBps) {
			pcie = max(or(s.RxMBps), 0) + max(or(s.TxMBps), 0)
		}
		out = append(out, idle.Util{TimeMS: s.TimeMS, GPU: s.UtilGPU, SMActive: or(s.SMActive), PCIeMBps: pcie})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TimeMS < out[j].TimeMS })
	return out
}

// idleFromDaemon asks the daemon for pid's stack samples over the last
// window (idle.report with raw).
func idleFromDaemon(socket string, pid int, window time.Duration) (idle.Input, error) {
	f := daemonFlags{socket: socket}
	var res api.IdleResult
	p := api.IdleParams{PID: pid, WindowMS: max(window.Milliseconds(), 1000), Raw: true}
	if err := f.call(api.IdleReport, p, &res, 20*time.Second); err != nil {
		return idle.Input{}, err
	}
	if res.Input == nil {
		return idle.Input{}, fmt.Errorf("the daemon sent no stack samples of process %d", pid)
	}
	return *res.Input, nil
}

// idleInRecording is the input of the {"idle": …} line of a counters
// recording (JSON lines), if it has one.
func idleInRecording(path string) (*idle.Input, error) {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if !bytes.HasPrefix(line, []byte(`{"idle"`)) {
			continue
		}
		var rec struct {
			Idle api.IdleResult `json:"idle"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("%s: its idle line: %v", path, err)
		}
		return rec.Idle.Input, nil
	}
	return nil, nil
}

// writePhases prints the phases table; under a phase of the process's GPU
// whose idle has a finding, the finding.
func writePhases(w io.Writer, phases []gpuphase.Phase, byPhase []phaseIdle) {
	fmt.Fprintf(w, "%-3s %-12s %7s  %-23s %6s %6s %7s %9s %8s  %s\n", "GPU", "start", "secs", "class", "util", "mem%", "power", "PCIe MB/s", "mem GiB", "why")
	for _, p := range phases {
		e := p.Evidence
		fmt.Fprintf(w, "%-3d %-12s %7.0f  %-23s %6s %6s %7s %9s %8s  %s\n", p.Device,
			time.UnixMilli(p.Start).UTC().Format("15:04:05"), e.Seconds, p.Class,
			num(e.UtilGPU, "%.0f%%"), num(e.UtilMem, "%.0f%%"), num(e.PowerW, "%.0f W"), num(e.PCIeMBps, "%.0f"), num(e.MemUsedGiB, "%.1f"), e.Rule)
		for _, pi := range byPhase {
			if pi.Device == p.Device && pi.Start == p.Start && pi.Headline != "" {
				fmt.Fprintf(w, "    by line: %s\n", pi.Headline)
			}
		}
	}
}

// writeCountersIdle prints the idle finding after the phases.
func writeCountersIdle(w io.Writer, ci *countersIdle, source string) {
	fmt.Fprintf(w, "\nidle by line (stack samples %s):\n", source)
	writeIdle(w, &ci.Result)
}
