// counters_print.go: what vramscope counters prints, as a table or as JSON
// lines: the status, the devices, the rows as samples come, the summary.

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/vramscope/vramscope/daemon/counters"
)

// countersOut prints what a counters run gathers.
type countersOut struct {
	json    bool
	w       io.Writer
	enc     *json.Encoder
	devs    []counters.DeviceInfo
	col     *counters.Collector
	start   int64         // unix ms when sampling started
	next    map[int]int64 // JSON: per GPU, the first time not yet printed
	lastRow int64         // table: the time of the last row printed
}

func (o *countersOut) line(key string, v any) { _ = o.enc.Encode(map[string]any{key: v}) }

// header prints the sampler's status and devices, and the table's header
// when there will be rows.
func (o *countersOut) header(st counters.Status) {
	if o.json {
		o.line("status", st)
		for _, d := range o.devs {
			o.line("device", d)
		}
		return
	}
	writeCountersStatus(o.w, st)
	writeDevices(o.w, o.devs)
	if st.Available {
		fmt.Fprintln(o.w)
		writeRowHeader(o.w)
	}
}

// flush prints what the collector gathered since the last flush: every
// sample and the processes as JSON lines, or a table row per GPU a second.
func (o *countersOut) flush() {
	if !o.json {
		o.flushRows()
		return
	}
	for _, d := range devIndexes(o.devs) {
		for _, s := range o.col.Series(d, max(o.next[d], o.start), 0, 0) {
			o.line("sample", s)
			o.next[d] = s.TimeMS + 1
		}
	}
	for _, p := range o.col.Processes() {
		o.line("process", p)
	}
}

func (o *countersOut) flushRows() {
	latest := o.col.Latest()
	if len(latest) == 0 || latest[0].TimeMS-o.lastRow < 950 { // a row a second, give or take a tick's jitter
		return
	}
	o.lastRow = latest[0].TimeMS
	for i := range latest {
		writeRow(o.w, &latest[i])
	}
}

func devIndexes(devs []counters.DeviceInfo) []int {
	out := make([]int, len(devs))
	for i, d := range devs {
		out[i] = d.Index
	}
	return out
}

func writeCountersStatus(w io.Writer, st counters.Status) {
	if !st.Available {
		fmt.Fprintf(w, "NVML: unavailable: %s\n", st.Reason)
		return
	}
	var parts []string
	if st.DriverVersion != "" {
		parts = append(parts, "driver "+st.DriverVersion)
	}
	if st.NVMLVersion != "" {
		parts = append(parts, "NVML "+st.NVMLVersion)
	}
	if v := st.CUDADriverVersion; v > 0 {
		parts = append(parts, fmt.Sprintf("CUDA %d.%d", v/1000, v%1000/10))
	}
	parts = append(parts, fmt.Sprintf("%d GPUs", st.DeviceCount))
	fmt.Fprintf(w, "NVML: %s\n", strings.Join(parts, ", "))
	if st.LastError != "" {
		fmt.Fprintf(w, "  note: %s\n", st.LastError)
	}
}

func writeDevices(w io.Writer, devs []counters.DeviceInfo) {
	for _, d := range devs {
		arch := strings.TrimSpace(d.Architecture + " " + d.ComputeCapability)
		gpm := "no GPM"
		if d.GPM {
			gpm = "GPM"
		}
		var parts []string
		for _, p := range []string{d.Name, d.UUID, gib(d.MemoryTotalBytes), arch, d.PCIBusID, gpm} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		fmt.Fprintf(w, "  GPU %d  %s\n", d.Index, strings.Join(parts, "  "))
	}
}

func writeRowHeader(w io.Writer) {
	fmt.Fprintf(w, "%-12s %3s %17s %7s %5s %5s %7s %4s %6s %6s %6s %6s %6s %15s\n",
		"time", "GPU", "mem used/total", "resv", "util", "mem", "power", "temp", "SM MHz",
		"SMact", "SMocc", "tensor", "DRAM", "PCIe tx/rx")
}

func writeRow(w io.Writer, s *counters.DeviceSample) {
	mem := "-"
	if s.Has(counters.FieldMemUsed) {
		mem = fmt.Sprintf("%.1f/%s", float64(s.MemUsedBytes)/(1<<30), gib(s.MemTotalBytes))
	}
	gpm := func(f counters.Fields, v func(*counters.GPMSample) float64) string {
		if s.GPM == nil || !s.Has(f) {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", v(s.GPM))
	}
	pcie := "-"
	if s.Valid&(counters.FieldPCIeTx|counters.FieldPCIeRx) != 0 {
		pcie = opt32(s, counters.FieldPCIeTx, s.PCIeTxKBps, kbps) + "/" + opt32(s, counters.FieldPCIeRx, s.PCIeRxKBps, kbps)
	}
	fmt.Fprintf(w, "%-12s %3d %17s %7s %5s %5s %7s %4s %6s %6s %6s %6s %6s %15s\n",
		time.UnixMilli(s.TimeMS).Format("15:04:05.000"), s.Device, mem,
		optU64(s, counters.FieldMemReserved, s.MemReservedBytes, mib),
		opt32(s, counters.FieldUtilGPU, s.UtilGPUPct, pct), opt32(s, counters.FieldUtilMem, s.UtilMemPct, pct),
		opt32(s, counters.FieldPower, s.PowerMW, watts), opt32(s, counters.FieldTemp, s.TempC, celsius),
		opt32(s, counters.FieldSMClock, s.SMClockMHz, plain),
		gpm(counters.FieldGPMSMActive, func(g *counters.GPMSample) float64 { return g.SMActivePct }),
		gpm(counters.FieldGPMSMOccupancy, func(g *counters.GPMSample) float64 { return g.SMOccupancyPct }),
		gpm(counters.FieldGPMTensorActive, func(g *counters.GPMSample) float64 { return g.TensorActivePct }),
		gpm(counters.FieldGPMDRAMBW, func(g *counters.GPMSample) float64 { return g.DRAMBWUtilPct }),
		pcie)
}

func opt32(s *counters.DeviceSample, f counters.Fields, v uint32, format func(uint32) string) string {
	if !s.Has(f) {
		return "-"
	}
	return format(v)
}

func optU64(s *counters.DeviceSample, f counters.Fields, v uint64, format func(uint64) string) string {
	if !s.Has(f) {
		return "-"
	}
	return format(v)
}

func pct(v uint32) string     { return fmt.Sprintf("%d%%", v) }
func watts(v uint32) string   { return fmt.Sprintf("%.0f W", float64(v)/1000) }
func celsius(v uint32) string { return fmt.Sprintf("%dC", v) }
func plain(v uint32) string   { return fmt.Sprint(v) }
func mib(v uint64) string     { return fmt.Sprintf("%.0f MiB", float64(v)/(1<<20)) }
func gib(v uint64) string     { return fmt.Sprintf("%.1f GiB", float64(v)/(1<<30)) }

// kbps formats KiB/s.
func kbps(v uint32) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1fG", float64(v)/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1fM", float64(v)/(1<<10))
	}
	return fmt.Sprintf("%dK", v)
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// writeCountersSummary prints, per GPU over the run: peak memory used, mean and
// peak utilisation, peak power and temperature, mean GPM metrics.
func writeCountersSummary(w io.Writer, col *counters.Collector, devs []counters.DeviceInfo, fromMS int64) {
	fmt.Fprintln(w, "\nsummary over the run:")
	for _, d := range devs {
		ss := col.Series(d.Index, fromMS, 0, 0)
		if len(ss) == 0 {
			fmt.Fprintf(w, "  GPU %d: no samples\n", d.Index)
			continue
		}
		var peakMem uint64
		var peakPower, peakTemp, peakUtil uint32
		var utilSum, nUtil float64
		var gsum [4]float64
		var gn [4]int
		for i := range ss {
			s := &ss[i]
			if s.Has(counters.FieldMemUsed) {
				peakMem = max(peakMem, s.MemUsedBytes)
			}
			if s.Has(counters.FieldUtilGPU) {
				utilSum += float64(s.UtilGPUPct)
				nUtil++
				peakUtil = max(peakUtil, s.UtilGPUPct)
			}
			if s.Has(counters.FieldPower) {
				peakPower = max(peakPower, s.PowerMW)
			}
			if s.Has(counters.FieldTemp) {
				peakTemp = max(peakTemp, s.TempC)
			}
			if s.GPM != nil {
				for k, f := range []counters.Fields{counters.FieldGPMSMActive, counters.FieldGPMSMOccupancy, counters.FieldGPMTensorActive, counters.FieldGPMDRAMBW} {
					if s.Has(f) {
						gsum[k] += []float64{s.GPM.SMActivePct, s.GPM.SMOccupancyPct, s.GPM.TensorActivePct, s.GPM.DRAMBWUtilPct}[k]
						gn[k]++
					}
				}
			}
		}
		fmt.Fprintf(w, "  GPU %d: %d samples, peak mem %s", d.Index, len(ss), gib(peakMem))
		if nUtil > 0 {
			fmt.Fprintf(w, ", util mean %.0f%% peak %d%%", utilSum/nUtil, peakUtil)
		}
		if peakPower > 0 {
			fmt.Fprintf(w, ", peak %s", watts(peakPower))
		}
		if peakTemp > 0 {
			fmt.Fprintf(w, ", peak %dC", peakTemp)
		}
		for k, name := range []string{"SM active", "SM occupancy", "tensor", "DRAM bw"} {
			if gn[k] > 0 {
				fmt.Fprintf(w, ", %s %.1f%%", name, gsum[k]/float64(gn[k]))
			}
		}
		fmt.Fprintln(w)
	}
}

// writeProcesses lists the processes NVML sees now, with their peak memory
// over the run.
func writeProcesses(w io.Writer, col *counters.Collector, fromMS int64) {
	ps := col.Processes()
	if len(ps) == 0 {
		fmt.Fprintln(w, "\nno compute processes on the GPUs")
		return
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Device != ps[j].Device {
			return ps[i].Device < ps[j].Device
		}
		return ps[i].PID < ps[j].PID
	})
	fmt.Fprintln(w, "\nprocesses:")
	fmt.Fprintf(w, "  %8s %3s %11s %11s %5s %5s\n", "pid", "GPU", "used", "peak", "SM", "mem")
	for _, p := range ps {
		var peak uint64
		for _, h := range col.ProcessSeries(p.PID, fromMS, 0, 0) {
			if h.Device == p.Device && h.Has(counters.ProcUsed) {
				peak = max(peak, h.UsedBytes)
			}
		}
		used, sm, mem := "-", "-", "-"
		if p.Has(counters.ProcUsed) {
			used = gib(p.UsedBytes)
		}
		if p.Has(counters.ProcSMUtil) {
			sm = pct(p.SMUtilPct)
		}
		if p.Has(counters.ProcMemUtil) {
			mem = pct(p.MemUtilPct)
		}
		peakS := "-"
		if peak > 0 {
			peakS = gib(peak)
		}
		fmt.Fprintf(w, "  %8d %3d %11s %11s %5s %5s\n", p.PID, p.Device, used, peakS, sm, mem)
	}
}
