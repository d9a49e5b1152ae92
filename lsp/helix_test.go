package lsp

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/reftool"
)

// helix finds Helix: $VRAMSCOPE_HX, the one make setup unpacks into .helix
// (Debian 13's hx, lsp/testdata/helix/install.sh), or hx on PATH.
func helix(t *testing.T) string {
	t.Helper()
	return editorBinary(t, []string{os.Getenv("VRAMSCOPE_HX"), "../.helix/hx", "hx"}, func(out []byte) string {
		if !strings.HasPrefix(string(out), "helix ") {
			return "not Helix"
		}
		return ""
	}, "no Helix (make setup unpacks Debian's hx into .helix: lsp/testdata/helix/install.sh)")
}

// helixConfig writes lsp/testdata/helix's config.toml and languages.toml
// (docs/editors.md) into dir/helix, with bin as the server's command, the
// daemon off and snapshot as the snapshot.
func helixConfig(t *testing.T, dir, bin, snapshot string) {
	t.Helper()
	langs, err := os.ReadFile("testdata/helix/languages.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(langs)
	for _, r := range [][2]string{
		{`command = "vramscope"`, `command = "` + bin + `"`},
		{`args = ["lsp"]`, `args = ["lsp", "--daemon", "off"]`},
		{`snapshot = "runs/oom.pickle"`, `snapshot = "` + snapshot + `"`},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("testdata/helix/languages.toml has no %s", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	cfg, err := os.ReadFile("testdata/helix/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "helix"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"languages.toml": []byte(text), "config.toml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, "helix", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tmuxPane is Helix running in a detached tmux session of its own.
type tmuxPane struct {
	t    *testing.T
	tmux string
	sock string
	env  []string
}

func (p *tmuxPane) run(args ...string) (string, error) {
	cmd := exec.Command(p.tmux, append([]string{"-u", "-S", p.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	if out, err := p.run(append([]string{"send-keys"}, keys...)...); err != nil {
		p.t.Fatalf("tmux send-keys %q: %v\n%s", keys, err, out)
	}
}

// mode sends keys and answers a wait for the status line to show status
// (the mode, "NOR" or "INS", or the cursor's "line:column").
func (p *tmuxPane) mode(keys ...string) func(status string) {
	p.keys(keys...)
	return func(status string) {
		p.t.Helper()
		if _, seen := p.waitLine(0, " "+status); !strings.Contains(seen, " "+status) {
			p.t.Fatalf("after %q the status line does not show %s:\n%s", keys, status, seen)
		}
	}
}

// waitLine waits up to 20 s for screen line number at (in Helix's gutter; 0:
// any line) to hold every one of want; it answers the number of the last
// line seen that held them (0: none), and that line or the screen.
func (p *tmuxPane) waitLine(at int, want ...string) (int, string) {
	gutter := regexp.MustCompile(`^\S*\s+(\d+) `)
	n, seen := 0, ""
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		screen, _ := p.run("capture-pane", "-p")
		n, seen = 0, screen
	lines:
		for _, line := range strings.Split(screen, "\n") {
			for _, w := range want {
				if !strings.Contains(line, w) {
					continue lines
				}
			}
			n, seen = 0, line
			if m := gutter.FindStringSubmatch(line); m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			break
		}
		if seen != screen && (at == 0 || n == at) {
			break
		}
	}
	return n, seen
}

// TestHelix runs Helix (Debian 13's hx 25.01.1) in a tmux pane with the
// setup of docs/editors.md (lsp/testdata/helix) against the real server on
// the OOM fixture: hx --health finds the server; Helix starts it with the
// settings as initializationOptions; the hint and the OOM's diagnostic are
// drawn at the end of the forward line; both stay on it after two lines are
// typed above; the hover on it names the recorded line. make setup installs
// Helix (and Debian's tmux where missing); without them the test skips, and
// fails in CI.
func TestHelix(t *testing.T) {
	hx := helix(t)
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		reftool.Missing(t, "tmux is not installed (make setup, or apt-get install tmux)")
	}
	bin := buildVramscope(t)
	dir := t.TempDir()
	snapshot := filepath.Join(fixtures, "snapshots/oom_batch.pickle")
	helixConfig(t, dir, bin, snapshot)
	env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color",
		"XDG_CONFIG_HOME=" + dir, "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"XDG_STATE_HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_RUNTIME_DIR=" + dir}

	health := exec.Command(hx, "--health", "python")
	health.Env = env
	out, err := health.CombinedOutput()
	plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(out), "")
	if err != nil || !strings.Contains(plain, "✓ "+bin) {
		t.Errorf("hx --health python does not find the server %s: %v\n%s", bin, err, plain)
	}

	p := &tmuxPane{t: t, tmux: tmux, sock: filepath.Join(dir, "tmux.sock"), env: env}
	log := filepath.Join(dir, "hx.log")
	if out, err := p.run("new-session", "-d", "-x", "160", "-y", "50", "-c", fixtures,
		hx, "-v", "--log", log, "trainer/train_gpt2.py"); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		p.run("kill-server")
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("Helix's log:\n%s", b)
		}
	})

	const forward = "out = model(input_ids=ids, labels=ids)"
	const hint = "2.94 GiB at peak · 54% · 168 allocs"
	const diag = "One request of 1.53 GiB at loss_utils.py:59"
	// The diagnostic is pushed when the analysis ends. Helix asks for the
	// hints once it opened the file and takes no workspace/inlayHint/refresh:
	// the server answers that request when the analysis ends, so the hint is
	// there before any edit.
	if n, seen := p.waitLine(22, forward, hint, diag); n != 22 {
		t.Errorf("want the hint and the OOM's diagnostic on line 22, the forward line; saw %d:\n%s", n, seen)
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), `vramscope -> {"jsonrpc":"2.0","method":"initialize"`) ||
		!strings.Contains(string(b), `"initializationOptions":{"vramscope":{"hintThreshold":0.01,"snapshot":"`+snapshot+`"}}`) {
		t.Errorf("Helix's log has no initialize of vramscope with the settings as initializationOptions:\n%s", b)
	}

	// Two lines typed above. Each Escape goes alone, and the next keys wait
	// for normal mode: an Escape followed at once by a key reads as Alt+key.
	p.mode("g", "g", "O")("INS")
	p.keys("import sys", "Enter")
	p.mode("Escape")("NOR")
	if n, seen := p.waitLine(1, "import sys"); n != 1 {
		t.Errorf("the typed line is not line 1: %d %s", n, seen)
	}
	if n, seen := p.waitLine(24, forward, hint, diag); n != 24 {
		t.Errorf("after two lines typed above, want the hint and the diagnostic on line 24; saw %d:\n%s", n, seen)
	}

	p.mode("2", "4", "G")("24:1")
	p.keys("Space", "k")
	const hover = "vramscope · train_gpt2.py:22: 2.94 GiB live at peak"
	if _, seen := p.waitLine(0, hover); !strings.Contains(seen, hover) {
		t.Errorf("no hover on the forward line:\n%s", seen)
	}
	p.mode("Escape")("NOR")
	p.keys(":q!", "Enter")
}
