package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// spoolingAgent runs the real Python agent in a child with no daemon to
// talk to: it simulates an out-of-memory error, waits until the snapshot is
// in its spool (under cache, as XDG_CACHE_HOME) and exits. It returns the
// child's pid once it has exited.
func spoolingAgent(t *testing.T, cache, src string) int {
	t.Helper()
	script := `import os, sys, time, vramscope
from vramscope import _paths
from vramscope.agent import _agent
vramscope.attach()
_agent._simulate_oom(device=0, requested=7, device_total=8, device_free=0)
for _ in range(200):
    d = _paths.spool_dir()
    if os.path.isdir(d) and any(n.endswith(".json") for n in os.listdir(d)):
        break
    time.sleep(0.05)
`
	cmd := startPython(t, script, []string{"PYTHONPATH=" + mustAbs("../jupyter"), "XDG_CACHE_HOME=" + cache,
		"VRAMSCOPE_SOCKET=" + filepath.Join(cache, "nobody.sock"), "VRAMSCOPE_TEST_SNAPSHOT=" + mustAbs(src), "VRAMSCOPE_EXIT_WAIT=0"})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the agent: %v", err)
	}
	return cmd.Process.Pid
}

// TestSpoolOfExitedProcessImported: a process ran out of memory while no
// daemon ran (or the daemon hung at the OOM), spooled its snapshot and
// exited. The daemon started afterwards imports it (the message said it
// would; before, it stayed in the spool for ever) and empties the spool.
func TestSpoolOfExitedProcessImported(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	pid := spoolingAgent(t, cache, "../examples/snapshots/oom/too_big.pickle")
	spool := filepath.Join(cache, "vramscope", "spool")
	if names, _ := os.ReadDir(spool); len(names) != 2 {
		t.Fatalf("the spool holds %v", names)
	}
	d, _ := testDaemon(t, func(c *Config) { c.Spool = spool })
	waitFor(t, 30*time.Second, "the spooled snapshot stored", func() (bool, string) {
		l := d.store.List()
		return len(l) == 1, fmt.Sprintf("%d stored", len(l))
	})
	m := d.store.List()[0]
	if m.Reason != "oom" || m.PID != pid || m.Label != "spooled" {
		t.Errorf("stored %+v; want the oom of pid %d", m, pid)
	}
	if err := d.store.Verify(m.ID); err != nil {
		t.Error(err)
	}
	want, _ := os.ReadFile("../examples/snapshots/oom/too_big.pickle")
	if m.Bytes != int64(len(want)) {
		t.Errorf("stored %d bytes, the agent's snapshot has %d", m.Bytes, len(want))
	}
	waitFor(t, 5*time.Second, "the spool emptied", func() (bool, string) {
		names, _ := os.ReadDir(spool)
		return len(names) == 0, fmt.Sprint(names)
	})
}

// spoolFile writes the pair _capture.py writes, for process pid at time ms,
// the pickle a copy of src (or, with link, a symbolic link to it).
func spoolFile(t *testing.T, spool string, pid int, ms int64, src string, link bool) string {
	t.Helper()
	base := fmt.Sprintf("oom-%d-%d-1", pid, ms)
	host, _ := os.Hostname()
	side := fmt.Sprintf(`{"pid": %d, "host": %q, "argv": ["train.py"], "time_ms": %d, "captured": {"path": "x", "device": 0, "reason": "oom"}}`, pid, host, ms)
	if err := os.WriteFile(filepath.Join(spool, base+".json"), []byte(side), 0o600); err != nil {
		t.Fatal(err)
	}
	pick := filepath.Join(spool, base+".pickle")
	if link {
		os.Symlink(mustAbs(src), pick)
	} else if err := copyFile(src, pick); err != nil {
		t.Fatal(err)
	}
	return base
}

// TestSpoolImportsOnlyWhatItMay: a live process's spool is left to its
// agent; a pickle that is a symbolic link is not followed; a spool others
// may write to is not read at all.
func TestSpoolImportsOnlyWhatItMay(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	os.Mkdir(spool, 0o700)
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Skip(err)
	}
	now := time.Now().UnixMilli()
	live := spoolFile(t, spool, os.Getpid(), now, "../examples/snapshots/leak_steps.pickle", false)
	linked := spoolFile(t, spool, exited.Process.Pid, now, "../examples/snapshots/leak_steps.pickle", true)
	d, _ := testDaemon(t, func(c *Config) { c.Spool = spool })
	d.importSpool()
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots imported", n)
	}
	for _, name := range []string{live + ".pickle", live + ".json", linked + ".json"} {
		if _, err := os.Lstat(filepath.Join(spool, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat("../examples/snapshots/leak_steps.pickle"); err != nil {
		t.Errorf("the link's target: %v", err)
	}
	os.Remove(filepath.Join(spool, live+".json"))
	os.Remove(filepath.Join(spool, linked+".json"))
	open := spoolFile(t, spool, exited.Process.Pid, now+1, "../examples/snapshots/leak_steps.pickle", false)
	os.Chmod(spool, 0o777)
	d.importSpool()
	if _, err := os.Lstat(filepath.Join(spool, open+".pickle")); err != nil || len(d.store.List()) != 0 {
		t.Errorf("imported from a spool others may write to: %v, %d stored", err, len(d.store.List()))
	}
	os.Chmod(spool, 0o700)
	d.importSpool()
	if n := len(d.store.List()); n != 1 {
		t.Errorf("%d snapshots imported from the private spool, want 1", n)
	}
}
