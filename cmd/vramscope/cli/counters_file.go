package cli

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// classifyCounters splits a counter recording (vramscope counters --json, the
// daemon's counters.series, or nvidia-smi dmon text) into classified phases.
func classifyCounters(path string, totalGiB float64, asJSON bool, stdout, stderr io.Writer) int {
	samples, err := gpuphase.ReadFile(path, totalGiB*1024)
	if err != nil {
		return fail(stderr, inputError{err})
	}
	phases := gpuphase.Phases(samples)
	if asJSON {
		return printJSON(stdout, stderr, map[string]any{"file": path, "samples": len(samples), "phases": phases})
	}
	fmt.Fprintf(stdout, "%s: %d samples, %d phases\n", path, len(samples), len(phases))
	fmt.Fprintf(stdout, "%-3s %-12s %7s  %-23s %6s %6s %7s %9s %8s  %s\n", "GPU", "start", "secs", "class", "util", "mem%", "power", "PCIe MB/s", "mem GiB", "why")
	for _, p := range phases {
		e := p.Evidence
		fmt.Fprintf(stdout, "%-3d %-12s %7.0f  %-23s %6s %6s %7s %9s %8s  %s\n", p.Device,
			time.UnixMilli(p.Start).UTC().Format("15:04:05"), e.Seconds, p.Class,
			num(e.UtilGPU, "%.0f%%"), num(e.UtilMem, "%.0f%%"), num(e.PowerW, "%.0f W"), num(e.PCIeMBps, "%.0f"), num(e.MemUsedGiB, "%.1f"), e.Rule)
	}
	return exitOK
}

func num(v *float64, format string) string {
	if v == nil || math.IsNaN(*v) {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}
