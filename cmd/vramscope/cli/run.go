package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/client"
)

// runRun starts the daemon if none answers, then replaces itself with the
// user's command, with the agent's bootstrap on PYTHONPATH: every Python
// process under it (each torchrun rank too) attaches once it initialises CUDA.
func runRun(args []string, stdout, stderr io.Writer) int {
	cmdArgs, own := splitDashDash(args)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket")
	maxEntries := fs.Int("max-entries", 100000, "allocator history ring size per process")
	python := fs.String("python", "", "the Python that has the vramscope package (default: the command's, else python3)")
	if _, ok := parse(fs, own, stderr); !ok {
		return exitInput
	}
	if cmdArgs == nil {
		fmt.Fprintln(stderr, "vramscope run: usage: vramscope run [--socket S] [--max-entries N] -- COMMAND ARGS...")
		return exitInput
	}
	if *socket == "" {
		s, err := daemon.DefaultSocket()
		if err != nil {
			return fail(stderr, err)
		}
		*socket = s
	}
	if err := ensureDaemon(*socket); err != nil {
		fmt.Fprintf(stderr, "vramscope run: %v; the job runs without capture\n", err)
	}
	boot, err := bootPath(pickPython(*python, cmdArgs))
	if err != nil {
		return fail(stderr, err)
	}
	env := setEnv(os.Environ(), map[string]string{
		"VRAMSCOPE_AUTO":        "1",
		"VRAMSCOPE_SOCKET":      *socket,
		"VRAMSCOPE_MAX_ENTRIES": strconv.Itoa(*maxEntries),
		"PYTHONPATH":            joinPath(boot, os.Getenv("PYTHONPATH")),
	})
	exe, err := exec.LookPath(cmdArgs[0])
	if err != nil {
		return fail(stderr, inputError{fmt.Errorf("vramscope run: %v", err)})
	}
	err = syscall.Exec(exe, cmdArgs, env)
	return fail(stderr, fmt.Errorf("running %s: %w", exe, err))
}

// runAttach hands over to the Python side, which needs the target's interpreter.
func runAttach(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket")
	python := fs.String("python", "python3", "a Python with the vramscope package")
	pos, ok := parse(fs, args, stderr)
	if !ok || len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope attach: want one PID")
		return exitInput
	}
	if err := hasAgent(*python); err != nil {
		return fail(stderr, err)
	}
	if *socket == "" {
		*socket, _ = daemon.DefaultSocket()
	}
	if err := ensureDaemon(*socket); err != nil {
		return fail(stderr, err)
	}
	cmd := exec.Command(*python, "-m", "vramscope", "attach", pos[0], "--socket", *socket)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return fail(stderr, err)
	}
	return exitOK
}

// hasAgent checks that python can import the agent (the vramscope package)
// before anything starts, and says what to install when it cannot.
func hasAgent(python string) error {
	out, err := exec.Command(python, "-c", "import importlib.util as u, sys; sys.exit(0 if u.find_spec('vramscope') else 3)").CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return inputError{fmt.Errorf("%s has no vramscope package (the agent): install it into the Python the process runs: "+
			"%s -m pip install ./jupyter from a vramscope checkout, or the wheel `make dist` writes; or name that Python with --python", python, python)}
	case errors.As(err, &ee):
		return inputError{fmt.Errorf("%s could not check for the vramscope package: %v: %s", python, err, strings.TrimSpace(string(out)))}
	}
	return inputError{fmt.Errorf("no Python at %q (%v): name the one the process runs with --python", python, err)}
}

// ensureDaemon starts `vramscope serve` in the background when no daemon answers.
func ensureDaemon(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logFile := filepath.Join(filepath.Dir(socket), "daemon.log")
	os.MkdirAll(filepath.Dir(socket), 0o700)
	c, _, err := client.Ensure(ctx, socket, "cli", exe, []string{"--quiet=false"}, logFile, 8*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// setEnv returns env with the keys of set replaced or added. syscall.Exec
// passes duplicates through, and the C library's getenv reads the first one,
// so an appended PYTHONPATH would be ignored.
func setEnv(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

func splitDashDash(args []string) (cmd, own []string) {
	for i, a := range args {
		if a == "--" {
			if i+1 < len(args) {
				return args[i+1:], args[:i]
			}
			return nil, args[:i]
		}
	}
	return nil, args
}

// pickPython is the interpreter whose vramscope package provides the bootstrap.
func pickPython(flagValue string, cmd []string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv("VRAMSCOPE_PYTHON"); v != "" {
		return v
	}
	if base := filepath.Base(cmd[0]); strings.HasPrefix(base, "python") {
		return cmd[0]
	}
	return "python3"
}

func bootPath(python string) (string, error) {
	out, err := exec.Command(python, "-m", "vramscope", "boot-path").Output()
	if err != nil {
		return "", fmt.Errorf("%s cannot import the vramscope agent (pip install ./jupyter, or set --python): %v", python, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func joinPath(first, rest string) string {
	if rest == "" {
		return first
	}
	return first + string(os.PathListSeparator) + rest
}
