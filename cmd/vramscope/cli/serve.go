package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	var cfg daemon.Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Socket, "socket", "", "Unix socket (default $VRAMSCOPE_SOCKET, else $XDG_RUNTIME_DIR/vramscope/daemon.sock)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "snapshot store (default $XDG_STATE_HOME/vramscope); yours, writable by nobody else")
	fs.StringVar(&cfg.Spool, "spool", "", "import the out-of-memory snapshots agents spooled here once their process has exited (default $XDG_CACHE_HOME/vramscope/spool; - for none)")
	fs.StringVar(&cfg.TCP, "tcp", "", "also listen on this loopback address, e.g. 127.0.0.1:7425 (token in the token file)")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "where the TCP token is written (default the socket's path and .token); never over a file vramscope did not write")
	fs.DurationVar(&cfg.Interval, "interval", 100*time.Millisecond, "NVML sampling interval")
	fs.IntVar(&cfg.MaxSnapshots, "max-snapshots", 200, "keep at most this many snapshots")
	var maxGiB float64
	fs.Float64Var(&maxGiB, "max-gib", 20, "keep at most this many GiB of snapshots")
	fs.BoolVar(&cfg.NoCounters, "no-counters", false, "do not sample NVML counters")
	fs.StringVar(&cfg.Export.Addr, "metrics", "", "serve Prometheus metrics (/metrics) and pprof profiles (/debug/pprof/gpu_memory) on this address, e.g. :9464 (loopback unless --metrics-public)")
	fs.BoolVar(&cfg.Export.Public, "metrics-public", false, "allow --metrics on a non-loopback address: anyone who reaches it reads the metrics and profiles, without a token")
	fs.StringVar(&cfg.Kube.KubeletURL, "kubelet", "", "name pods from this kubelet's pod list, e.g. https://$NODE_IP:10250/pods (needs nodes/proxy; docs/cluster.md)")
	fs.StringVar(&cfg.Kube.TokenFile, "kubelet-token", "/var/run/secrets/kubernetes.io/serviceaccount/token", "bearer token for --kubelet")
	fs.StringVar(&cfg.Kube.CAFile, "kubelet-ca", "", "CA of the kubelet's serving certificate (default the system roots)")
	fs.BoolVar(&cfg.Kube.Insecure, "kubelet-insecure-skip-verify", false, "do not verify the kubelet's certificate (it is often self-signed)")
	quiet := fs.Bool("quiet", false, "log nothing")
	exitWith := fs.Int("exit-with", 0, "stop once process PID has exited (the language server passes its own pid when it starts a daemon, so the daemon goes with the editor)")
	if _, ok := parse(fs, args, stderr); !ok {
		return exitInput
	}
	if err := checkServeFlags(&cfg, maxGiB); err != nil {
		fmt.Fprintf(stderr, "vramscope serve: %v\n", err)
		return exitInput
	}
	cfg.Version = Version
	if !*quiet {
		cfg.Logf = func(format string, a ...any) {
			fmt.Fprintf(stderr, "%s vramscope: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
		}
	}
	d, err := daemon.New(cfg)
	if err != nil {
		return fail(stderr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *exitWith > 0 {
		go stopAfter(ctx, *exitWith, stop)
	}
	if err := d.Serve(ctx); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// checkServeFlags refuses flag values the daemon cannot use, naming the flag,
// and sets cfg.MaxBytes from --max-gib.
func checkServeFlags(cfg *daemon.Config, maxGiB float64) error {
	var err error
	if cfg.MaxBytes, err = gibBytes("--max-gib", maxGiB); err != nil {
		return err
	}
	if cfg.MaxSnapshots <= 0 {
		return fmt.Errorf("--max-snapshots %d: keep at least 1", cfg.MaxSnapshots)
	}
	if cfg.Interval <= 0 {
		return fmt.Errorf("--interval %s: it must be positive", cfg.Interval)
	}
	return nil
}

// gibBytes converts a flag's GiB to bytes: a positive number small enough
// for an int64 of bytes (float conversion would wrap 1e30 to a negative).
func gibBytes(flag string, gib float64) (int64, error) {
	const maxGiB = math.MaxInt64 >> 30
	if math.IsNaN(gib) || gib <= 0 || gib > maxGiB {
		return 0, fmt.Errorf("%s %g: give a number of GiB above 0 and at most %d", flag, gib, int64(maxGiB))
	}
	return int64(gib * (1 << 30)), nil
}

// stopAfter calls stop once process pid has exited (polled: a process that is
// not our child cannot be waited for).
func stopAfter(ctx context.Context, pid int, stop func()) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if syscall.Kill(pid, 0) == syscall.ESRCH {
				stop()
				return
			}
		}
	}
}
