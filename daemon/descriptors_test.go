package daemon

import (
	"strings"
	"testing"
)

// TestSizeBudget: the listeners' budgets leave a quarter of the descriptor
// limit (at least 16) and 16 more to the owner and the store, whatever the
// limit; a limit too low to serve is refused in words.
func TestSizeBudget(t *testing.T) {
	for _, nofile := range []int{48, 64, 128, 1024, 20000, 1 << 20} {
		b, err := sizeBudget(nofile, DefaultTCPLimits)
		if err != nil {
			t.Fatalf("%d: %v", nofile, err)
		}
		held := b.tcp.Pending + b.tcp.Authed + b.export
		if held+b.reserve+baseDescriptors > nofile || b.reserve < max(minOwnerReserve, nofile/4) {
			t.Errorf("%d descriptors: %s", nofile, b)
		}
		if b.tcp.PendingPeer > b.tcp.Pending || b.tcp.Pending < 1 || b.tcp.Authed < 1 || b.export < 1 {
			t.Errorf("%d descriptors: %s", nofile, b)
		}
	}
	if b, _ := sizeBudget(1<<20, DefaultTCPLimits); b.tcp != DefaultTCPLimits || b.export != exportMaxConns {
		t.Errorf("a high limit lowered the defaults: %s", b)
	}
	if _, err := sizeBudget(30, DefaultTCPLimits); err == nil || !strings.Contains(err.Error(), "ulimit -n") {
		t.Errorf("30 descriptors: %v", err)
	}
	if b, err := sizeBudget(0, DefaultTCPLimits); err != nil || b.tcp != DefaultTCPLimits {
		t.Errorf("an unknown limit: %v %s", err, b)
	}
}
