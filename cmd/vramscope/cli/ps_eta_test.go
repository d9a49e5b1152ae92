package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/daemontest"
)

// TestPSShowsOOMETA: ps has an OOM ETA column: "-" for a process whose
// memory does not grow, the time left with "!" once the daemon has warned.
func TestPSShowsOOMETA(t *testing.T) {
	d := daemontest.Start(t)
	for _, pid := range []int{9401, 9402} {
		daemontest.Agent(t, d.Socket, api.RegisterParams{PID: pid, Host: "test", WorldSize: 1, Argv: []string{"python", "train.py"}},
			"../../../examples/snapshots/leak_steps.pickle")
	}
	d.Levels(9401, daemontest.Leak(1100), 3<<30)
	o := mustRun(t, "ps", "--socket", d.Socket)
	t.Logf("ps:\n%s", o.stdout)
	lines := strings.Split(o.stdout, "\n")
	if !strings.Contains(lines[0], "OOM ETA") {
		t.Fatalf("no OOM ETA column: %q", lines[0])
	}
	leak := regexp.MustCompile(`^\s+9401 .* ([0-9]+s)!  python train.py$`)
	flat := regexp.MustCompile(`^\s+9402 .* -  python train.py$`)
	if !leak.MatchString(lines[1]) || !flat.MatchString(lines[2]) {
		t.Errorf("ps rows:\n%s\n%s", lines[1], lines[2])
	}
}
