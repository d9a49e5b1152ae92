package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunPutsTheBootstrapFirst runs the real binary's `run` with a Python child
// and an existing PYTHONPATH: the child must see the agent's bootstrap first,
// once, and the run settings.
func TestRunPutsTheBootstrapFirst(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	bin := filepath.Join(t.TempDir(), "vramscope")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	jupyter, _ := filepath.Abs("../../../jupyter")
	dir := t.TempDir()
	socket := filepath.Join(dir, "d.sock")
	cmd := exec.Command(bin, "run", "--socket", socket, "--max-entries", "1234", "--", py, "-c",
		"import os, sys; print(os.environ['PYTHONPATH']); print(os.environ['VRAMSCOPE_MAX_ENTRIES']); print(os.environ['VRAMSCOPE_AUTO']); print('sitecustomize' in sys.modules)")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+jupyter, "XDG_RUNTIME_DIR="+dir, "XDG_STATE_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 4 {
		t.Fatalf("output:\n%s", out)
	}
	parts := strings.Split(lines[len(lines)-4], string(os.PathListSeparator))
	if !strings.HasSuffix(parts[0], filepath.Join("vramscope", "_boot")) || parts[1] != jupyter || len(parts) != 2 {
		t.Errorf("PYTHONPATH in the child = %q, want the bootstrap then %s", lines[len(lines)-4], jupyter)
	}
	if lines[len(lines)-3] != "1234" || lines[len(lines)-2] != "1" || lines[len(lines)-1] != "True" {
		t.Errorf("child saw %q", lines)
	}
	// The daemon was started for the run; stop it by its pid.
	b, err := exec.Command(bin, "status", "--socket", socket, "--json").Output()
	var st struct{ PID int }
	if err != nil || json.Unmarshal(b, &st) != nil || st.PID <= 0 {
		t.Fatalf("no daemon after run: %v %s", err, b)
	}
	syscall.Kill(st.PID, syscall.SIGTERM)
}

func TestSetEnvReplaces(t *testing.T) {
	env := setEnv([]string{"A=1", "PYTHONPATH=/x", "B=2"}, map[string]string{"PYTHONPATH": "/boot:/x", "C": "3"})
	got := strings.Join(env, " ")
	if strings.Count(got, "PYTHONPATH=") != 1 || !strings.Contains(got, "PYTHONPATH=/boot:/x") || !strings.Contains(got, "C=3") || !strings.Contains(got, "A=1") {
		t.Errorf("setEnv = %v", env)
	}
}
