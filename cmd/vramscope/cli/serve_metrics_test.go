package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// serve --metrics refuses an address beyond loopback without
// --metrics-public, and says which flag to pass.
func TestServeMetricsLoopbackOnly(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := runServe([]string{"--socket", filepath.Join(dir, "d.sock"), "--data-dir", filepath.Join(dir, "data"), "--no-counters",
		"--metrics", "0.0.0.0:0"}, &out, &errb)
	if code == exitOK || !strings.Contains(errb.String(), "--metrics-public") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
