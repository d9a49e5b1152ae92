package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/cmd/vramscope/cli"
)

var commandNames = []string{"analyze", "flame", "diff", "whatif", "convert", "serve", "run", "attach", "lsp",
	"status", "ps", "snap", "snapshots", "counters", "completion", "version"}

// help CMD and CMD --help print to stdout, exit 0, name the positional
// arguments and list the command's flags.
func TestHelpOfEachCommand(t *testing.T) {
	positional := map[string]string{"analyze": "FILE", "flame": "FILE", "diff": "A B", "whatif": "A B C...",
		"convert": "FILE.vsm", "attach": "PID", "snap": "PID", "run": "-- COMMAND ARGS...", "completion": "bash|zsh|fish"}
	flags := map[string][]string{"analyze": {"-map", "-root", "-json", "-html", "-top", "-device-memory"},
		"flame": {"-o ", "-weight", "-format", "-keep-wrappers"}, "run": {"-socket", "-max-entries", "-python"},
		"whatif": {"-sizes", "-device-memory", "-overhead", "-predict", "-json"}, "lsp": {"-snapshot", "-daemon"}}
	for _, name := range commandNames {
		for _, args := range [][]string{{"help", name}, {name, "--help"}, {name, "-h"}, {name, "x", "--help"}} {
			o := run(args...)
			if o.code != 0 || o.stderr != "" {
				t.Errorf("%v: exit %d, stderr %q", args, o.code, o.stderr)
				continue
			}
			if !strings.HasPrefix(o.stdout, "usage: vramscope "+name) {
				t.Errorf("%v: stdout starts %q", args, firstLine(o.stdout))
			}
			if p := positional[name]; p != "" && !strings.Contains(firstLine(o.stdout), p) {
				t.Errorf("%v: the usage line %q does not name %s", args, firstLine(o.stdout), p)
			}
			for _, f := range flags[name] {
				if !strings.Contains(o.stdout, "  "+f) {
					t.Errorf("%v: no flag %s in\n%s", args, f, o.stdout)
				}
			}
		}
	}
	// After --, --help is the user's command's.
	if o := run("run", "--", "python3", "--help"); strings.HasPrefix(o.stdout, "usage:") {
		t.Errorf("run -- python3 --help printed vramscope's help")
	}
	if o := run("help", "nonsense"); o.code != 2 || !strings.Contains(o.stderr, "unknown command") {
		t.Errorf("help nonsense: %+v", o)
	}
}

// The top-level usage goes to stdout for --help and help, to stderr (exit 2)
// without a command; it lists every flag the README's Commands block lists
// and points to COMMAND --help for the rest.
func TestTopLevelUsage(t *testing.T) {
	for _, a := range []string{"help", "--help", "-h"} {
		if o := run(a); o.code != 0 || !strings.HasPrefix(o.stdout, "usage: vramscope COMMAND") || o.stderr != "" {
			t.Errorf("%s: %+v", a, o)
		}
	}
	o := run()
	if o.code != 2 || o.stdout != "" || !strings.HasPrefix(o.stderr, "usage:") {
		t.Fatalf("no command: %+v", o)
	}
	usage := o.stderr
	if !strings.Contains(usage, "COMMAND --help") {
		t.Errorf("the usage does not point to COMMAND --help")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)## Commands\n\n```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ```sh block under ## Commands")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		fields := strings.Fields(line)
		cmd := fields[1]
		got := usageLine(usage, cmd)
		if got == "" {
			t.Errorf("the usage has no line for %s (README: %s)", cmd, line)
			continue
		}
		for _, f := range regexp.MustCompile(`(?:^|[\s\[])(--?[a-z][a-z-]*)`).FindAllStringSubmatch(line, -1) {
			if !strings.Contains(got, f[1]) {
				t.Errorf("README lists %s for %s; the usage line %q does not", f[1], cmd, got)
			}
		}
	}
}

func usageLine(usage, cmd string) string {
	for _, l := range strings.Split(usage, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "vramscope "+cmd+" ") {
			return l
		}
	}
	return ""
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func TestVersionFlag(t *testing.T) {
	for _, a := range []string{"--version", "version"} {
		o := run(a)
		if o.code != 0 || strings.TrimSpace(o.stdout) != "vramscope "+cli.Version {
			t.Errorf("%s: %+v", a, o)
		}
	}
}

// Each script lists every command and each command's flags; bash runs it.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		o := run("completion", sh)
		if o.code != 0 {
			t.Fatalf("completion %s: %+v", sh, o)
		}
		for _, want := range append(commandNames, "device-memory", "keep-wrappers", "max-entries") {
			if !strings.Contains(o.stdout, want) {
				t.Errorf("completion %s lacks %s", sh, want)
			}
		}
		if bin, err := exec.LookPath(sh); err == nil {
			script := filepath.Join(t.TempDir(), "vramscope."+sh)
			if err := os.WriteFile(script, []byte(o.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
			if sh == "fish" {
				out, err := exec.Command(bin, "-c", "source "+script+"; complete -C 'vramscope analyze --dev'").CombinedOutput()
				if err != nil || !strings.HasPrefix(string(out), "--device-memory") {
					t.Errorf("fish completing 'vramscope analyze --dev': %q, %v", out, err)
				}
			}
		}
	}
	if o := run("completion", "tcsh"); o.code != 2 || !strings.Contains(o.stderr, "bash, zsh or fish") {
		t.Errorf("completion tcsh: %+v", o)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := run("completion", "bash").stdout
	for _, c := range []struct{ words, want string }{
		{"vramscope an", "analyze"},
		{"vramscope analyze --dev", "--device-memory"},
		{"vramscope flame --keep", "--keep-wrappers"},
		{"vramscope completion f", "fish"},
		{"vramscope help wh", "whatif"},
	} {
		if out, err := bashComplete(bash, script, c.words); err != nil || out != c.want {
			t.Errorf("bash completing %q: %q, %v; want %q", c.words, out, err, c.want)
		}
	}
}

// The progress line appears only on a terminal and only once the work has
// run a second; it holds no escape sequences (NO_COLOR needs nothing else).
func TestProgressLine(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	draw, done := cli.Progress(f, "reading x")
	if draw != nil {
		t.Fatal("progress draws into a file")
	}
	done()

	clock := time.Unix(0, 0)
	restore := cli.FakeTerminal(func() time.Time { return clock })
	defer restore()
	draw, done = cli.Progress(f, "reading x")
	draw(10, 100)
	clock = clock.Add(900 * time.Millisecond)
	draw(20, 100)
	if b, _ := os.ReadFile(f.Name()); len(b) != 0 {
		t.Errorf("drawn before a second had passed: %q", b)
	}
	clock = clock.Add(200 * time.Millisecond)
	draw(50, 100)
	done()
	b, _ := os.ReadFile(f.Name())
	if !bytes.Contains(b, []byte("reading x [###############...............]  50%")) {
		t.Errorf("no progress line after a second: %q", b)
	}
	if bytes.ContainsRune(b, 0x1b) {
		t.Errorf("the progress line has an escape sequence: %q", b)
	}
	var buf bytes.Buffer
	if draw, _ := cli.Progress(&buf, "x"); draw != nil {
		t.Error("progress draws into a buffer")
	}
}

// Nothing vramscope prints has colour or other escape sequences, with
// NO_COLOR set or not.
func TestNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	snap := filepath.Join(exampleDir, "example_train.pickle")
	for _, args := range [][]string{{"analyze", snap}, {"diff", snap, snap}, {"help"}, {"analyze", "--help"}, {"analyze", "nope.pickle"}} {
		o := run(args...)
		if strings.ContainsRune(o.stdout+o.stderr, 0x1b) {
			t.Errorf("%v printed an escape sequence", args)
		}
	}
}
