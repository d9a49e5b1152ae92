package lsp

import (
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/daemontest"
	"github.com/vramscope/vramscope/lsp/command"
)

// TestMemoryWarning: a real daemon warns that a leaking process will fill
// its device; the editor gets one message saying when and what grows, and a
// warning diagnostic on the line the warning's snapshot names.
func TestMemoryWarning(t *testing.T) {
	d := daemontest.Start(t)
	daemontest.Agent(t, d.Socket, api.RegisterParams{PID: 6161, Host: "test", WorldSize: 1, Argv: []string{"python", "train.py"}, Recording: true},
		"../examples/snapshots/leak_steps.pickle")
	c := start(t, Config{Daemon: "connect", Socket: d.Socket}, nil)
	var sb command.StatusBar
	for i := 0; i < 300 && !sb.Daemon; i++ {
		c.call("workspace/executeCommand", map[string]any{"command": command.Status}, &sb)
		time.Sleep(10 * time.Millisecond)
	}
	if !sb.Daemon {
		t.Fatalf("the server never reached the daemon: %+v", sb)
	}
	d.Levels(6161, daemontest.Leak(1100), 3<<30)
	var msg string
	c.waitFor("the warning message", func() bool {
		for _, m := range c.msgs {
			if strings.Contains(m, "will run out of GPU memory") {
				msg = m
			}
		}
		return msg != ""
	})
	t.Logf("message: %s", msg)
	for _, want := range []string{"pid 6161", "1.00 MiB/step", "3.00 GiB", "record_examples.py:87", "Leak"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	c.waitFor("a memory_warning diagnostic on record_examples.py:87", func() bool {
		for u, diags := range c.diags {
			for _, dg := range diags {
				if strings.HasSuffix(u, "examples/record/record_examples.py") && dg.Code == "memory_warning" && dg.Range.Start.Line == 86 &&
					strings.Contains(dg.Message, "Memory grows here") {
					return true
				}
			}
		}
		return false
	})
	d.Levels(6161, daemontest.Leak(1110), 3<<30) // the same growth: no second message
	time.Sleep(300 * time.Millisecond)
	c.mu.Lock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(m, "will run out") {
			n++
		}
	}
	c.mu.Unlock()
	if n != 1 {
		t.Errorf("%d warning messages, want 1", n)
	}
}
