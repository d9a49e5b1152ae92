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
	"runtime/debug"
	"strings"
	"time"
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

// commands is filled in init: help and completions read it, and the commands read them.
var commands []command

func init() {
	commands = []command{
		{"analyze", "analyze FILE|ID [--map REMOTE=LOCAL] [--root DIR] [--names FILE.json] [--json] [--html OUT] [--report] [--bundle WEIGHT] [--top N] [--device-memory SIZE]  peak, top lines, stacks, allocator state, findings", runAnalyze},
		{"flame", "flame FILE [-o OUT] [--weight peak|alloc|current] [--format html|json|collapsed|pprof] [--keep-wrappers]  flame graph", runFlame},
		{"diff", "diff A B [--json] [--html OUT] [--report]  per-line change between two snapshots A and B", runDiff},
		{"ranks", "ranks GROUP | FILE FILE... [--json]  the ranks of one job side by side: peak, reserved, categories, imbalance, the outlier ranks and their lines", runRanks},
		{"whatif", "whatif A B C... [--sizes 2,4,8] [--device-memory 80GiB] [--overhead 1GiB] [--predict N,...] [--json]  fit peak memory against batch size or length; the largest size that fits", runWhatIf},
		{"fit", "fit FILE --budget SIZE [--batch N] [--seq L] [--recorded BxL] [--json]  from one recorded step: the peak at another batch or length, and the plans that fit the budget (micro-batch and accumulation, checkpointing, 8-bit optimizer state, expandable segments)", runFit},
		{"convert", "convert FILE.vsm [-o OUT.pickle]  write a streamed (VSM1) snapshot as PyTorch's pickle", runConvert},
		{"serve", "serve [--socket S] [--data-dir D] [--tcp 127.0.0.1:PORT]  run the per-user daemon", runServe},
		{"run", "run [--socket S] [--max-entries N] [--python PY] -- COMMAND ARGS...  run a training command with the agent in every Python process", runRun},
		{"attach", "attach PID  attach the agent to a running Python >= 3.14 process", runAttach},
		{"mcp", "mcp [--socket S] [--http 127.0.0.1:PORT] [--token-file F]  the Model Context Protocol server for coding assistants, over stdio (or loopback HTTP with a token)", runMCP},
		{"lsp", "lsp [--snapshot FILE] [--daemon auto|connect|off]  the language server, over stdio", runLSP},
		{"status", "status  the daemon's state", runStatus},
		{"ps", "ps  processes with an agent, and GPU processes without one", runPS},
		{"idle", "idle PID|FILE.json [--window 60s] [--json] [--raw]  why the GPU idled: the share of wall time and the lines the training thread was on, by cause, with fixes", runIdle},
		{"snap", "snap PID [--label L] [--job]  take a snapshot of process PID through its agent; --job: of every rank of its launch at once", runSnap},
		{"snapshots", "snapshots  the stored snapshots: ID, reason (OOM marked), size, process, file", runSnapshots},
		{"import", "import FILE [--label L]  copy a snapshot file into the daemon's store (then analyze ID, ranks, the editor)", runImport},
		{"counters", "counters [--interval 100ms] [--duration 5s] [--json] [--pid N]  sample the GPUs' NVML counters, their phases, and with --pid why the GPU idled by line (the daemon's stack samples); counters FILE [--json] [--idle IDLE.json] classifies a recording (vramscope JSON or nvidia-smi dmon) into phases, with the idle finding when it carries stack samples", runCounters},
		{"completion", "completion bash|zsh|fish  print the shell completion script", runCompletion},
		{"help", "help [COMMAND]  this list, or COMMAND's arguments and every flag", nil},
		{"version", "version  print the version (also --version)", runVersion},
	}
}

// Version is set at build time with -ldflags (make dist does); a binary from
// `go install .../cmd/vramscope@vX.Y.Z` reports its module version instead.
var Version = "0.1.0-dev"

func version() string {
	if Version != "0.1.0-dev" {
		return Version
	}
	// A build from a checkout is stamped "(devel)" or a pseudo-version ending in +dirty; neither names a release.
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" && !strings.HasSuffix(bi.Main.Version, "+dirty") {
		return bi.Main.Version
	}
	return Version
}

// Main runs one subcommand and returns the process exit status. Asked for
// help (help, -h, --help, help COMMAND, COMMAND --help) it prints to stdout
// and exits 0; without a command it prints the list to stderr and exits 2.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitInput
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "--version", "-version":
		return runVersion(nil, stdout, stderr)
	case "help":
		return runHelp(args[1:], stdout, stderr)
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "vramscope: unknown command %q\n", args[0])
		usage(stderr)
		return exitInput
	}
	if asksHelp(args[1:]) {
		return commandHelp(c, stdout)
	}
	return c.run(args[1:], stdout, stderr)
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name && c.run != nil {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vramscope COMMAND ...")
	for _, c := range commands {
		fmt.Fprintf(w, "  vramscope %s\n", c.usage)
	}
	fmt.Fprintln(w, "\n`vramscope help COMMAND` or `vramscope COMMAND --help` lists a command's arguments and every flag; --version prints the version.")
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if _, ok := parse(fs, args, stderr); !ok {
		return exitInput
	}
	fmt.Fprintln(stdout, "vramscope", version())
	return exitOK
}

// parse reads flags given before, between or after positional arguments.
// While flagsOf captures a command's flags, it stops here without parsing.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, bool) {
	if capturing != nil {
		capturing.fs = fs
		return nil, false
	}
	fs.SetOutput(stderr)
	fs.Usage = func() { writeCommandHelp(fs.Output(), fs.Name(), fs) }
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
	fmt.Fprintf(stderr, "vramscope: %s\n", termSafe(err.Error())) // errors quote snapshots and agents
	var ie inputError
	if errors.As(err, &ie) {
		return exitInput
	}
	return exitFail
}

// inputError marks an error caused by the user's input.
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// progress draws a line on stderr for work that has run a second or more,
// when stderr is a terminal; into a pipe or a file it draws nothing. It never
// uses colour (nor any escape sequence), so NO_COLOR holds by construction.
func progress(stderr io.Writer, label string) (func(done, total int64), func()) {
	f, ok := stderr.(*os.File)
	if !ok || !isTerminal(f) {
		return nil, func() {}
	}
	start := now()
	drawn := false
	return func(done, total int64) {
			if total <= 0 || now().Sub(start) < progressAfter {
				return
			}
			pct := float64(done) / float64(total)
			n := min(30, max(0, int(pct*30)))
			fmt.Fprintf(f, "\r%s [%s%s] %3.0f%%", label, strings.Repeat("#", n), strings.Repeat(".", 30-n), 100*pct)
			drawn = true
		}, func() {
			if drawn {
				fmt.Fprintf(f, "\r%s\r", strings.Repeat(" ", len(label)+40))
			}
		}
}

// progressAfter is how long work runs before its progress line appears.
const progressAfter = time.Second

// isTerminal and now are variables so that tests can stand in for a terminal and a clock.
var (
	isTerminal = func(f *os.File) bool {
		st, err := f.Stat()
		return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
	}
	now = time.Now
)
