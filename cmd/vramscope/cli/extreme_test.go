package cli_test

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/hostile"
)

// TestExtremeTimes: analyze on the crafted snapshot of round 2's High defect
// (time_us -2^63 and 2^62: the timeline's index overflowed and a panic on
// the analysis goroutine ended the process) fails with exit 2 and a message
// naming the file and the field, text and JSON alike.
func TestExtremeTimes(t *testing.T) {
	bad := hostile.Write(t, "crafted.pickle", hostile.ExtremeTimes())
	for _, args := range [][]string{{"analyze", bad}, {"analyze", "--json", bad}} {
		o := run(args...)
		if o.code != 2 || !strings.Contains(o.stderr, bad) || !strings.Contains(o.stderr, `"time_us" is -9223372036854775808`) ||
			strings.Contains(o.stderr, "internal error") {
			t.Errorf("vramscope %s: %v", strings.Join(args, " "), o)
		}
	}
}
