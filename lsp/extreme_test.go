package lsp

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/lsp/command"
)

// TestExtremeTimes: a snapshot whose time_us are -2^63 and 2^62 (round 2's
// High defect: its timeline index overflowed and the panic ended the
// server) is answered with a message naming the file and the field, and the
// server goes on to show a real snapshot.
func TestExtremeTimes(t *testing.T) {
	bad := hostile.Write(t, "crafted.pickle", hostile.ExtremeTimes())
	c := start(t, Config{}, map[string]any{"snapshot": bad})
	var msgs string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		msgs = fmt.Sprint(c.msgs)
		c.mu.Unlock()
		if strings.Contains(msgs, bad) {
			break
		}
	}
	if !strings.Contains(msgs, bad) || !strings.Contains(msgs, `"time_us" is -9223372036854775808`) {
		t.Fatalf("no message naming %s and its time_us in 30 s: %s", bad, msgs)
	}
	good := filepath.Join(fixtures, "snapshots", "gpt2_train.pickle")
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": good}}}, nil)
	c.waitShown("gpt2_train.pickle")
}
