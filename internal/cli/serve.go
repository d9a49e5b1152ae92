package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	fs.StringVar(&cfg.DataDir, "data-dir", "", "snapshot store (default $XDG_STATE_HOME/vramscope)")
	fs.StringVar(&cfg.TCP, "tcp", "", "also listen on this loopback address, e.g. 127.0.0.1:7425 (token in the token file)")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "where the TCP token is written (default beside the socket)")
	fs.DurationVar(&cfg.Interval, "interval", 100*time.Millisecond, "NVML sampling interval")
	fs.IntVar(&cfg.MaxSnapshots, "max-snapshots", 200, "keep at most this many snapshots")
	var maxGiB float64
	fs.Float64Var(&maxGiB, "max-gib", 20, "keep at most this many GiB of snapshots")
	fs.BoolVar(&cfg.NoCounters, "no-counters", false, "do not sample NVML counters")
	quiet := fs.Bool("quiet", false, "log nothing")
	if _, ok := parse(fs, args, stderr); !ok {
		return exitInput
	}
	cfg.MaxBytes = int64(maxGiB * (1 << 30))
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
	if err := d.Serve(ctx); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}
