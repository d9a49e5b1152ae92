package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/lsp"
)

// runLSP speaks the language server protocol on stdin/stdout; logs go to stderr.
func runLSP(args []string, _, stderr io.Writer) int {
	var cfg lsp.Config
	fs := flag.NewFlagSet("lsp", flag.ContinueOnError)
	fs.StringVar(&cfg.Snapshot, "snapshot", "", "show this snapshot file (works without a daemon)")
	fs.StringVar(&cfg.Socket, "socket", "", "the daemon's socket (default as vramscope serve)")
	fs.StringVar(&cfg.Daemon, "daemon", "auto", "auto: connect, starting a daemon when none runs; connect: only connect; off: never")
	fs.Bool("stdio", true, "talk over stdin/stdout (the only transport; accepted for editors that pass it)")
	if _, ok := parse(fs, args, stderr); !ok {
		return exitInput
	}
	if cfg.Socket == "" {
		cfg.Socket, _ = daemon.DefaultSocket()
	}
	cfg.Exe, _ = os.Executable()
	cfg.Logf = func(format string, a ...any) {
		fmt.Fprintf(stderr, "%s vramscope lsp: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	lsp.Version = Version
	if err := lsp.New(cfg).Serve(context.Background(), stdio{}); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// stdio joins stdin and stdout into the server's stream.
type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdio) Close() error                { os.Stdin.Close(); return os.Stdout.Close() }
