// Package prometheus holds vramscope's example Prometheus rules; this test
// checks them with promtool (Debian's prometheus package ships it): the
// file's syntax and templates (check rules) and its unit test (test rules:
// the alert fires on a counting-down ETA under 15 minutes, not before).
package prometheus

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
)

func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		reftool.Missing(t, "promtool is not on PATH (apt-get install prometheus, or make setup): the rule checks are skipped")
		return
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesCheck(t *testing.T) { promtool(t, "check", "rules", "oom-warning.rules.yml") }

func TestRulesUnitTest(t *testing.T) { promtool(t, "test", "rules", "oom-warning.test.yml") }
