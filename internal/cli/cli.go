// Package cli holds vramscope's subcommands, one file each. Each command's
// flags are the fields of its struct; Main dispatches by name.
package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses: 2 is bad input (a file that cannot be read as a snapshot, a
// bad flag), 1 is any other failure.
const (
	exitOK    = 0
	exitFail  = 1
	exitInput = 2
)

type command struct {
	name, usage string
	run         func(args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"analyze", "analyze FILE [--map REMOTE=LOCAL] [--root DIR] [--json] [--html OUT]  peak, top lines, stacks, allocator state, findings", runAnalyze},
	{"flame", "flame FILE [-o OUT] [--weight peak|alloc|current] [--format html|json|collapsed|pprof]  flame graph", runFlame},
	{"diff", "diff A B [--json]  per-line change between two snapshots", runDiff},
	{"whatif", "whatif A B ... [--sizes N,N,...] [--device-memory 80GiB] [--predict N]  fit peak memory against batch size or length; the largest size that fits", runWhatIf},
	{"convert", "convert FILE.vsm [-o OUT.pickle]  write a streamed (VSM1) snapshot as PyTorch's pickle", runConvert},
	{"serve", "serve [--socket S] [--data-dir D] [--tcp 127.0.0.1:PORT]  run the per-user daemon", runServe},
	{"run", "run [--max-entries N] -- COMMAND ARGS...  run a training command with the agent in every Python process", runRun},
	{"attach", "attach PID  attach the agent to a running Python >= 3.14 process", runAttach},
	{"lsp", "lsp [--snapshot FILE] [--daemon auto|connect|off]  the language server, over stdio", runLSP},
	{"status", "status  the daemon's state", runStatus},
	{"ps", "ps  processes with an agent, and GPU processes without one", runPS},
	{"snap", "snap PID [--label L]  take a snapshot of a process through its agent", runSnap},
	{"snapshots", "snapshots  the stored snapshots", runSnapshots},
	{"counters", "counters [--interval 100ms] [--duration 5s] [--json]  sample the GPUs' NVML counters; counters FILE [--json] classifies a recording (vramscope JSON or nvidia-smi dmon) into phases", runCounters},
	{"version", "version  print the version", runVersion},
}

// Version is set at build time with -ldflags.
var Version = "0.1.0-dev"

// Main runs one subcommand and returns the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitInput
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "vramscope: unknown command %q\n", args[0])
	usage(stderr)
	return exitInput
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vramscope COMMAND ...")
	for _, c := range commands {
		fmt.Fprintf(w, "  vramscope %s\n", c.usage)
	}
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "vramscope", Version)
	return exitOK
}

// parse reads flags given before, between or after positional arguments.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, bool) {
	fs.SetOutput(stderr)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, true
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// printJSON writes v indented, as every --json flag does.
func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// fail prints one line for an error and picks the exit status: input errors
// (unreadable or malformed snapshot) exit 2.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "vramscope: %v\n", err)
	var ie inputError
	if errors.As(err, &ie) {
		return exitInput
	}
	return exitFail
}

// inputError marks an error caused by the user's input.
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// progress draws a bar on stderr when it is a terminal.
func progress(stderr io.Writer, label string) (func(done, total int64), func()) {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil, func() {}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil, func() {}
	}
	drawn := false
	return func(done, total int64) {
			if total <= 0 {
				return
			}
			pct := float64(done) / float64(total)
			n := int(pct * 30)
			fmt.Fprintf(f, "\r%s [%s%s] %3.0f%%", label, strings.Repeat("#", n), strings.Repeat(".", max(0, 30-n)), 100*pct)
			drawn = true
		}, func() {
			if drawn {
				fmt.Fprintf(f, "\r%s\r", strings.Repeat(" ", len(label)+40))
			}
		}
}
