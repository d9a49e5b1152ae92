package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler"
)

// daemonFlags are the flags of every command that talks to a running daemon.
type daemonFlags struct {
	socket string
	json   bool
}

func (f *daemonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.socket, "socket", "", "the daemon's socket (default as vramscope serve)")
	fs.BoolVar(&f.json, "json", false, "print the daemon's answer as JSON")
}

func (f *daemonFlags) dial(ctx context.Context) (*client.Client, error) {
	if f.socket == "" {
		s, err := daemon.DefaultSocket()
		if err != nil {
			return nil, err
		}
		f.socket = s
	}
	c, err := client.Dial(ctx, f.socket, "cli")
	if err != nil {
		return nil, dialError(f.socket, err)
	}
	return c, nil
}

// dialError advises starting a daemon only when none is there (no socket, or
// nobody listening on it); a daemon that is there but does not answer, or
// answers with an error, is a different problem.
func dialError(socket string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%v (start one with `vramscope serve`)", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the daemon at %s accepted the connection but did not answer in time (is it overloaded? see its log)", socket)
	}
	return fmt.Errorf("the daemon at %s: %w", socket, err)
}

// parseDaemonCmd parses the flags of a command that talks to the daemon;
// extra, when given, registers the command's own.
func parseDaemonCmd(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (daemonFlags, []string, bool) {
	var f daemonFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, ok := parse(fs, args, stderr)
	return f, pos, ok
}

// call dials, calls one method and closes.
func (f *daemonFlags) call(method string, params, result any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(ctx, method, params, result)
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	f, _, ok := parseDaemonCmd("status", args, stderr, nil)
	if !ok {
		return exitInput
	}
	var st api.StatusResult
	if err := f.call(api.Status, nil, &st, 10*time.Second); err != nil {
		return fail(stderr, err)
	}
	if f.json {
		return printJSON(stdout, stderr, st)
	}
	fmt.Fprintf(stdout, "daemon %s (API %s), pid %d on %s, up since %s\n", st.Version, st.APIVersion, st.PID, st.Host, st.Started)
	fmt.Fprintf(stdout, "socket %s  data %s  agents %d  snapshots %d\n", st.Socket, st.DataDir, st.Agents, st.Snapshots)
	if st.Counters.Available {
		fmt.Fprintf(stdout, "counters: %d GPU(s), driver %s, every %d ms\n", st.Counters.Devices, st.Counters.Driver, st.Counters.IntervalMS)
	} else {
		fmt.Fprintf(stdout, "counters: off (%s)\n", st.Counters.Reason)
	}
	return exitOK
}

func runPS(args []string, stdout, stderr io.Writer) int {
	f, _, ok := parseDaemonCmd("ps", args, stderr, nil)
	if !ok {
		return exitInput
	}
	var res api.ProcessListResult
	if err := f.call(api.ProcessList, nil, &res, 10*time.Second); err != nil {
		return fail(stderr, err)
	}
	if f.json {
		return printJSON(stdout, stderr, res)
	}
	stdout = terminal(stdout) // argv and notes come from the processes
	fmt.Fprintf(stdout, "%8s %5s %4s %10s %10s %5s %9s  %s\n", "PID", "RANK", "GPU", "GPU MEM", "TORCH", "UTIL", "OOM ETA", "COMMAND")
	for _, p := range res.Processes {
		rank := "-"
		if p.Agent {
			rank = fmt.Sprintf("%d/%d", p.Rank, max(p.WorldSize, 1))
		}
		torch := "-"
		if p.Agent {
			torch = profiler.FormatBytes(p.Allocated)
		}
		cmd := strings.Join(p.Argv, " ")
		if p.Note != "" {
			cmd += "  (" + p.Note + ")"
		}
		fmt.Fprintf(stdout, "%8d %5s %4d %10s %10s %5s %9s  %s\n", p.PID, rank, p.Device, profiler.FormatBytes(int64(p.GPUBytes)), torch, utilText(p), oomETA(p.Forecast), cmd)
		if p.IdleTop != "" {
			fmt.Fprintf(stdout, "%8s GPU idle %.0f%% of the last minute: %s (vramscope idle %d)\n", "", 100*p.IdleShare, p.IdleTop, p.PID)
		}
	}
	return exitOK
}

// oomETA is ps's OOM ETA: how long until the process's memory is projected
// to fill its device ("-" while it does not grow), in steps when its levels
// carry no times, "!" after it when the daemon has warned.
func oomETA(f *api.MemoryForecast) string {
	if f == nil {
		return "-"
	}
	eta := fmt.Sprintf("%d steps", f.StepsLeft)
	if !f.ProjectedTime.IsZero() {
		eta = (time.Duration(f.ETASeconds) * time.Second).String()
	}
	if f.Warned {
		eta += "!"
	}
	return eta
}

func runSnap(args []string, stdout, stderr io.Writer) int {
	var label *string
	var timeout *time.Duration
	var job *bool
	f, pos, ok := parseDaemonCmd("snap", args, stderr, func(fs *flag.FlagSet) {
		label = fs.String("label", "", "a note stored with the snapshot")
		timeout = fs.Duration("timeout", 2*time.Minute, "how long the process may take to dump")
		job = fs.Bool("job", false, "capture every rank of PID's launch at once (same torchrun run, master address or parent) as one group")
	})
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope snap: want one PID (see vramscope ps)")
		return exitInput
	}
	pid, err := strconv.Atoi(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "vramscope snap: %q is not a pid\n", pos[0])
		return exitInput
	}
	if *job {
		return snapJob(f, api.GroupTakeParams{PID: pid, Label: *label, TimeoutMS: timeout.Milliseconds()}, *timeout, stdout, stderr)
	}
	var res api.SnapshotResult
	p := api.TakeParams{PID: pid, Label: *label, Analyze: true, TimeoutMS: timeout.Milliseconds()}
	if err := f.call(api.SnapshotTake, p, &res, *timeout+10*time.Second); err != nil {
		return fail(stderr, err)
	}
	if f.json {
		return printJSON(stdout, stderr, res)
	}
	fmt.Fprintf(stdout, "snapshot %s: %s, %d entries, dumped in %.0f ms\n%s\n", res.ID, profiler.FormatBytes(res.Bytes), res.Entries, res.TookMS, res.Path)
	return exitOK
}

func runSnapshots(args []string, stdout, stderr io.Writer) int {
	f, _, ok := parseDaemonCmd("snapshots", args, stderr, nil)
	if !ok {
		return exitInput
	}
	var res api.ListResult
	if err := f.call(api.SnapshotList, api.ListParams{}, &res, 10*time.Second); err != nil {
		return fail(stderr, err)
	}
	if f.json {
		return printJSON(stdout, stderr, res)
	}
	stdout = terminal(stdout) // sources (argv[0]) and pods come from the processes
	writeSnapshots(stdout, res.Snapshots)
	return exitOK
}

// utilText is a process's GPU utilisation for ps: "-" without a reading.
func utilText(p api.Process) string {
	if p.UtilGPU == nil {
		return "-"
	}
	return fmt.Sprintf("%d%%", *p.UtilGPU)
}
