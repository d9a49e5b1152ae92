package transport

import (
	"strings"
	"testing"
)

// TestSizeBudget: the listeners' budgets leave a quarter of the descriptor
// limit (at least 16) and 16 more to the owner and the store, whatever the
// limit; a limit too low to serve is refused in words.
func TestSizeBudget(t *testing.T) {
	for _, nofile := range []int{48, 64, 128, 1024, 20000, 1 << 20} {
		b, err := SizeBudget(nofile, DefaultLimits)
		if err != nil {
			t.Fatalf("%d: %v", nofile, err)
		}
		held := b.TCP.Pending + b.TCP.Authed + b.Export
		if held+b.reserve+baseDescriptors > nofile || b.reserve < max(MinOwnerReserve, nofile/4) {
			t.Errorf("%d descriptors: %s", nofile, b)
		}
		if b.TCP.PendingPeer > b.TCP.Pending || b.TCP.Pending < 1 || b.TCP.Authed < 1 || b.Export < 1 {
			t.Errorf("%d descriptors: %s", nofile, b)
		}
	}
	if b, _ := SizeBudget(1<<20, DefaultLimits); b.TCP != DefaultLimits || b.Export != ExportMaxConns {
		t.Errorf("a high limit lowered the defaults: %s", b)
	}
	if _, err := SizeBudget(30, DefaultLimits); err == nil || !strings.Contains(err.Error(), "ulimit -n") {
		t.Errorf("30 descriptors: %v", err)
	}
	if b, err := SizeBudget(0, DefaultLimits); err != nil || b.TCP != DefaultLimits {
		t.Errorf("an unknown limit: %v %s", err, b)
	}
}
