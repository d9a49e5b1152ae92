package reftool

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingFailsInCI runs this test binary again, as a child, with
// VRAMSCOPE_CI=0 and =1, and checks Missing skips outside CI and fails in it.
func TestMissingFailsInCI(t *testing.T) {
	if os.Getenv("REFTOOL_CHILD") == "1" {
		Missing(t, "the tool under test is missing")
		return
	}
	run := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissingFailsInCI$", "-test.v")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "VRAMSCOPE_CI=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "REFTOOL_CHILD=1", "VRAMSCOPE_CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("0"); err != nil || !strings.Contains(out, "--- SKIP") {
		t.Errorf("outside CI: err %v, output:\n%s", err, out)
	}
	if out, err := run("1"); err == nil || !strings.Contains(out, "--- FAIL") || !strings.Contains(out, "install it") {
		t.Errorf("in CI: err %v, output:\n%s", err, out)
	}
}
