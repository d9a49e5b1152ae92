package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon/counters"
)

// openSampler is counters.Open; tests replace it.
var openSampler = counters.Open

type countersCmd struct {
	interval, duration time.Duration
	json               bool
}

// runCounters samples the GPUs' NVML counters for a while and prints them:
// the status, the devices, then one table row per GPU per second (or, with
// --json, every sample as a JSON line), and a summary. Without a driver it
// prints why and exits 0.
func runCounters(args []string, stdout, stderr io.Writer) int {
	var c countersCmd
	fs := flag.NewFlagSet("counters", flag.ContinueOnError)
	fs.DurationVar(&c.interval, "interval", counters.DefaultInterval, "sampling interval")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "how long to sample (0: until interrupted)")
	fs.BoolVar(&c.json, "json", false, "print JSON lines: {\"status\"}, {\"device\"}, {\"sample\"}, {\"process\"}, {\"summary\"}; with FILE, {\"phases\": [...]}")
	totalGiB := fs.Float64("total-gib", 0, "with a dmon FILE: the device's memory (dmon does not print it), for offload_traffic")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) == 1 {
		return classifyCounters(pos[0], *totalGiB, c.json, stdout, stderr)
	}
	if len(pos) > 1 || c.interval <= 0 || c.duration < 0 {
		fmt.Fprintln(stderr, "vramscope counters: at most one FILE; --interval must be > 0 and --duration >= 0")
		return exitInput
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	smp, st := openSampler()
	defer smp.Close()
	return c.run(ctx, smp, st, stdout)
}

// timedSampler measures the time each Sample takes: NVML calls are ioctls,
// so this bounds the sampler's CPU cost.
type timedSampler struct {
	counters.Sampler
	mu         sync.Mutex
	n          int
	total, max time.Duration
}

func (t *timedSampler) Sample(now time.Time) ([]counters.DeviceSample, []counters.ProcessSample, error) {
	start := time.Now()
	d, p, err := t.Sampler.Sample(now)
	el := time.Since(start)
	t.mu.Lock()
	t.n++
	t.total += el
	t.max = max(t.max, el)
	t.mu.Unlock()
	return d, p, err
}

func (c *countersCmd) run(ctx context.Context, smp counters.Sampler, st counters.Status, stdout io.Writer) int {
	enc := json.NewEncoder(stdout)
	line := func(key string, v any) { _ = enc.Encode(map[string]any{key: v}) }
	devs := smp.Devices()
	if c.json {
		line("status", st)
		for _, d := range devs {
			line("device", d)
		}
	} else {
		writeCountersStatus(stdout, st)
		writeDevices(stdout, devs)
	}
	if !st.Available {
		return exitOK
	}

	ts := &timedSampler{Sampler: smp}
	col := counters.NewCollector(ts, counters.Options{Interval: c.interval})
	ticked := make(chan struct{}, 1)
	unsub := col.OnTick(func([]counters.DeviceSample) {
		select { // never block the sampler
		case ticked <- struct{}{}:
		default:
		}
	})
	defer unsub()
	start := time.Now().UnixMilli()
	col.Start(ctx)

	// Print from this goroutine, pulling what the store has gathered since
	// the last print, so a slow terminal never holds the sampler up.
	next := map[int]int64{} // per GPU: the first time not yet printed
	lastRow := int64(0)
	if !c.json {
		fmt.Fprintln(stdout)
		writeRowHeader(stdout)
	}
	flush := func() {
		if c.json {
			for _, d := range devIndexes(devs) {
				for _, s := range col.Series(d, max(next[d], start), 0, 0) {
					line("sample", s)
					next[d] = s.TimeMS + 1
				}
			}
			for _, p := range col.Processes() {
				line("process", p)
			}
			return
		}
		latest := col.Latest()
		if len(latest) == 0 || latest[0].TimeMS-lastRow < 950 { // a row a second, give or take a tick's jitter
			return
		}
		lastRow = latest[0].TimeMS
		for i := range latest {
			writeRow(stdout, &latest[i])
		}
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-ticked:
			flush()
		}
	}
	col.Stop()
	flush()

	end := col.Status()
	ts.mu.Lock()
	n, total, worst := ts.n, ts.total, ts.max
	ts.mu.Unlock()
	mean := time.Duration(0)
	if n > 0 {
		mean = total / time.Duration(n)
	}
	if c.json {
		line("summary", map[string]any{"status": end, "ticks": n, "sample_mean_us": mean.Microseconds(),
			"sample_max_us": worst.Microseconds(), "processes": col.Processes()})
		return exitOK
	}
	writeCountersSummary(stdout, col, devs, start)
	writeProcesses(stdout, col, start)
	fmt.Fprintf(stdout, "\nsampling: %d ticks at %v, %d errors", end.Samples, c.interval, end.Errors)
	if end.LastError != "" {
		fmt.Fprintf(stdout, " (last: %s)", end.LastError)
	}
	if n > 0 {
		fmt.Fprintf(stdout, "; NVML time per tick: mean %s, max %s (%.2f%% of the interval)",
			fmtDur(mean), fmtDur(worst), 100*float64(mean)/float64(c.interval))
	}
	fmt.Fprintln(stdout)
	if len(end.LostDevices) > 0 {
		fmt.Fprintf(stdout, "lost GPUs (no longer sampled): %v\n", end.LostDevices)
	}
	if end.DroppedProcessSamples > 0 {
		fmt.Fprintf(stdout, "process samples not kept (too many processes): %d\n", end.DroppedProcessSamples)
	}
	return exitOK
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
