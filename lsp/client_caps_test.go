package lsp

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/lsp/command"
)

// waitFor polls the fake client until ok holds (under its lock) or 10 s pass.
func (c *fakeClient) waitFor(what string, ok func() bool) {
	c.t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		done := ok()
		c.mu.Unlock()
		if done {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.Fatalf("%s: not in 10 s (asked %v, messages %v)", what, c.asked, c.msgs)
}

// TestCapabilitiesHonoured: a client that advertises nothing gets no refresh,
// progress or showDocument request; one that advertises them (VS Code) gets
// each, the progress from begin to end.
func TestCapabilitiesHonoured(t *testing.T) {
	snap := filepath.Join(fixtures, "snapshots/gpt2_train.pickle")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the flame page below
	bare := startWith(t, Config{}, map[string]any{"snapshot": snap}, map[string]any{})
	bare.waitShown("gpt2_train.pickle")
	bare.call("workspace/executeCommand", map[string]any{"command": command.FlameGraph, "arguments": []any{map[string]any{}}}, nil)
	time.Sleep(300 * time.Millisecond) // anything sent after the show would be in by now
	bare.mu.Lock()
	if len(bare.asked) != 0 || len(bare.progress) != 0 {
		t.Errorf("a client without capabilities was sent %v (progress %v)", bare.asked, bare.progress)
	}
	bare.mu.Unlock()

	full := start(t, Config{}, map[string]any{"snapshot": snap})
	full.waitShown("gpt2_train.pickle")
	full.waitFor("refresh requests", func() bool {
		return full.asked[methodInlayHintRefresh] == 1 && full.asked[methodCodeLensRefresh] == 1
	})
	full.waitFor("progress to its end", func() bool {
		n := len(full.progress)
		return n >= 2 && full.progress[n-1]["kind"] == "end"
	})
	full.mu.Lock()
	defer full.mu.Unlock()
	if full.asked["window/workDoneProgress/create"] != 1 || full.progress[0]["kind"] != "begin" {
		t.Errorf("progress: create asked %d times, values %v", full.asked["window/workDoneProgress/create"], full.progress)
	}
	if end := fmt.Sprint(full.progress[len(full.progress)-1]["message"]); !strings.Contains(end, "5.42 GiB at peak") {
		t.Errorf("progress ends with %q", end)
	}
}

// TestNoSnapshotMessage: with nothing to show, one message says why and what to do.
func TestNoSnapshotMessage(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Daemon: "off"}, "the daemon is off"},
		{Config{Daemon: "connect", Socket: filepath.Join(t.TempDir(), "none.sock")}, "none.sock"},
	} {
		cl := start(t, c.cfg, nil)
		cl.waitFor("a message", func() bool { return len(cl.msgs) > 0 })
		cl.mu.Lock()
		msg := cl.msgs[0]
		cl.mu.Unlock()
		if !strings.Contains(msg, "no snapshot to show") || !strings.Contains(msg, c.want) || !strings.Contains(msg, "vramscope.snapshot") {
			t.Errorf("daemon %s: message %q, want one naming %q", c.cfg.Daemon, msg, c.want)
		}
	}
}

// TestProgressReports: while a snapshot is read the client sees reports of
// how far, in order, between begin and end. The analysis is slowed by the
// test's progress hook (each of its callbacks, one per 8 MiB read, waits 400 ms) so that it lasts
// several report periods on a small fixture.
func TestProgressReports(t *testing.T) {
	c := start(t, Config{}, nil)
	c.srv.snaps.progress = func(int64, int64) { time.Sleep(400 * time.Millisecond) }
	var sum command.Summary
	c.call("workspace/executeCommand", map[string]any{"command": command.OpenSnapshot,
		"arguments": []any{map[string]string{"path": filepath.Join(fixtures, "snapshots/gpt2_12l_python_stacks.pickle")}}}, &sum)
	c.waitFor("progress to its end", func() bool {
		n := len(c.progress)
		return n >= 2 && c.progress[n-1]["kind"] == "end"
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	last, reports := -1.0, 0
	for i, v := range c.progress {
		switch {
		case i == 0 && v["kind"] != "begin", i == len(c.progress)-1 && v["kind"] != "end":
			t.Errorf("progress %d: %v", i, v)
		case v["kind"] == "report":
			pct, _ := v["percentage"].(float64)
			if pct < last || pct > 100 {
				t.Errorf("report %v after %v%%", v, last)
			}
			last = pct
			reports++
		}
	}
	if reports == 0 {
		t.Errorf("no report between begin and end: %v", c.progress)
	}
	t.Logf("%d reports, the last at %v%%", reports, last)
}
