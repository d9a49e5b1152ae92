package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/profiler/gpuphase"
)

// openSampler is counters.Open; tests replace it.
var openSampler = counters.Open

type countersCmd struct {
	interval, duration time.Duration
	json               bool
	pid                int    // with stack samples of this process from the daemon: the idle finding by line
	socket             string // the daemon's, for pid
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
	fs.IntVar(&c.pid, "pid", 0, "also say why the GPU idled, by line: the daemon's stack samples of this process joined with the counters (the JSON gets an {\"idle\"} line a FILE carries)")
	fs.StringVar(&c.socket, "socket", "", "the daemon's socket, for --pid (default as vramscope serve)")
	idlePath := fs.String("idle", "", "with FILE: stack samples to join with it (vramscope idle --json --raw); a recording's own {\"idle\"} line otherwise")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) == 1 && c.pid > 0 {
		fmt.Fprintln(stderr, "vramscope counters: --pid goes with a live run; a FILE carries its samples (or give them with --idle)")
		return exitInput
	}
	if len(pos) == 1 {
		return classifyCounters(pos[0], *totalGiB, c.json, *idlePath, stdout, stderr)
	}
	if *idlePath != "" {
		fmt.Fprintln(stderr, "vramscope counters: --idle goes with a FILE; live, --pid asks the daemon for the samples")
		return exitInput
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

// stats says how many samples were taken and how long they took.
func (t *timedSampler) stats() (n int, mean, worst time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n > 0 {
		mean = t.total / time.Duration(t.n)
	}
	return t.n, mean, t.max
}

// run samples until ctx ends: the status and the devices first, then what
// the collector gathers as it comes, then a summary.
func (c *countersCmd) run(ctx context.Context, smp counters.Sampler, st counters.Status, stdout io.Writer) int {
	out := &countersOut{json: c.json, w: stdout, enc: json.NewEncoder(stdout), devs: smp.Devices(), next: map[int]int64{}}
	out.header(st)
	if !st.Available {
		return exitOK
	}
	ts := &timedSampler{Sampler: smp}
	out.col = counters.NewCollector(ts, counters.Options{Interval: c.interval})
	out.start = time.Now().UnixMilli()
	sampleUntilDone(ctx, out.col, out.flush)
	out.flush()
	if c.json { // the summary stays the last line
		c.phasesAndIdle(out)
		c.summary(out, ts)
		return exitOK
	}
	c.summary(out, ts)
	c.phasesAndIdle(out)
	return exitOK
}

// phasesAndIdle ends a live run: its phases, and with --pid the idle finding
// by line over it (the process's samples from the daemon, joined with this
// run's readings). A daemon that cannot answer is a note: the counters ran.
func (c *countersCmd) phasesAndIdle(out *countersOut) {
	var ss []gpuphase.Sample
	for _, d := range out.devs {
		for _, s := range out.col.Series(d.Index, out.start, 0, 0) {
			ss = append(ss, s.PhaseSample())
		}
	}
	phases := gpuphase.Phases(ss)
	var ci *countersIdle
	var idleErr error
	if c.pid > 0 {
		in, err := idleFromDaemon(c.socket, c.pid, time.Duration(time.Now().UnixMilli()-out.start)*time.Millisecond)
		if err == nil {
			j := joinCounters(in, ss, phases)
			ci = &j
		}
		idleErr = err
	}
	if c.json {
		out.line("phases", phases)
		switch {
		case ci != nil:
			out.line("idle", ci.Result)
			out.line("idle_by_phase", ci.ByPhase)
		case idleErr != nil:
			out.line("idle_error", idleErr.Error())
		}
		return
	}
	fmt.Fprintln(out.w, "\nphases:")
	if ci == nil {
		writePhases(out.w, phases, nil)
	} else {
		writePhases(out.w, phases, ci.ByPhase)
		writeCountersIdle(out.w, ci, fmt.Sprintf("of process %d from the daemon", c.pid))
	}
	if idleErr != nil {
		fmt.Fprintf(out.w, "\nidle by line: %s\n", termSafe(idleErr.Error()))
	}
}

// sampleUntilDone runs col until ctx ends and calls flush after each tick
// from this goroutine, pulling what the store has gathered since the last
// call, so a slow terminal never holds the sampler up.
func sampleUntilDone(ctx context.Context, col *counters.Collector, flush func()) {
	ticked := make(chan struct{}, 1)
	unsub := col.OnTick(func([]counters.DeviceSample) {
		select { // never block the sampler
		case ticked <- struct{}{}:
		default:
		}
	})
	defer unsub()
	col.Start(ctx)
	for {
		select {
		case <-ctx.Done():
			col.Stop()
			return
		case <-ticked:
			flush()
		}
	}
}

// summary ends the output: the whole run per GPU and per process, and what
// sampling cost.
func (c *countersCmd) summary(out *countersOut, ts *timedSampler) {
	end := out.col.Status()
	n, mean, worst := ts.stats()
	if c.json {
		out.line("summary", map[string]any{"status": end, "ticks": n, "sample_mean_us": mean.Microseconds(),
			"sample_max_us": worst.Microseconds(), "processes": out.col.Processes()})
		return
	}
	writeCountersSummary(out.w, out.col, out.devs, out.start)
	writeProcesses(out.w, out.col, out.start)
	fmt.Fprintf(out.w, "\nsampling: %d ticks at %v, %d errors", end.Samples, c.interval, end.Errors)
	if end.LastError != "" {
		fmt.Fprintf(out.w, " (last: %s)", end.LastError)
	}
	if n > 0 {
		fmt.Fprintf(out.w, "; NVML time per tick: mean %s, max %s (%.2f%% of the interval)",
			fmtDur(mean), fmtDur(worst), 100*float64(mean)/float64(c.interval))
	}
	fmt.Fprintln(out.w)
	if len(end.LostDevices) > 0 {
		fmt.Fprintf(out.w, "lost GPUs (no longer sampled): %v\n", end.LostDevices)
	}
	if end.DroppedProcessSamples > 0 {
		fmt.Fprintf(out.w, "process samples not kept (too many processes): %d\n", end.DroppedProcessSamples)
	}
}
