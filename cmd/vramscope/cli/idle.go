package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/idle"
)

// idleCmd is `vramscope idle PID|FILE.json`: why the GPU idled, by line.
type idleCmd struct {
	daemon daemonFlags
	window time.Duration
	raw    bool
}

func runIdle(args []string, stdout, stderr io.Writer) int {
	var c idleCmd
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	c.daemon.register(fs)
	fs.DurationVar(&c.window, "window", time.Minute, "how far back from the newest sample")
	fs.BoolVar(&c.raw, "raw", false, "with --json: also the join's input (utilisation and samples), a recording `vramscope idle FILE.json` reads")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope idle: want one PID (see vramscope ps) or a recording (FILE.json, from --json --raw)")
		return exitInput
	}
	res, code := c.result(pos[0], stderr)
	if code != exitOK {
		return code
	}
	if c.daemon.json {
		return printJSON(stdout, stderr, res)
	}
	writeIdle(terminal(stdout), &res)
	return exitOK
}

// result asks the daemon about a pid, or joins a recording offline.
func (c *idleCmd) result(arg string, stderr io.Writer) (api.IdleResult, int) {
	pid, err := strconv.Atoi(arg)
	if err != nil {
		in, err := readIdleInput(arg)
		if err != nil {
			fmt.Fprintf(stderr, "vramscope idle: %v\n", err)
			return api.IdleResult{}, exitInput
		}
		r := idle.Join(in, idle.Options{})
		return daemon.IdleResultOf(&r), exitOK
	}
	var res api.IdleResult
	p := api.IdleParams{PID: pid, WindowMS: c.window.Milliseconds(), Raw: c.raw}
	if err := c.daemon.call(api.IdleReport, p, &res, 20*time.Second); err != nil {
		return res, fail(stderr, err)
	}
	return res, exitOK
}

// readIdleInput reads a recording: the input of a join, or a --json --raw
// answer that holds one.
func readIdleInput(path string) (idle.Input, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return idle.Input{}, err
	}
	var wrapped struct {
		Input *idle.Input `json:"input"`
	}
	if err := json.Unmarshal(b, &wrapped); err != nil {
		return idle.Input{}, fmt.Errorf("%s: not an idle recording: %v", path, err)
	}
	if wrapped.Input != nil {
		return *wrapped.Input, nil
	}
	var in idle.Input
	if err := json.Unmarshal(b, &in); err != nil || len(in.Util) == 0 {
		return idle.Input{}, fmt.Errorf("%s: not an idle recording (no utilisation readings)", path)
	}
	return in, nil
}
