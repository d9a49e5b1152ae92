package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/idle"
)

const idleRecordings = "../../../profiler/idle/testdata/"

// vramscope idle on recordings of the H200 runs (examples/idle): the text
// says the idle share, the finding, the lines and the fix; --json is the
// daemon's idle.report result; a file that is no recording is bad input.
func TestIdleRecordings(t *testing.T) {
	o := mustRun(t, "idle", idleRecordings+"slow_loader.input.json")
	for _, want := range []string{
		"pid 2094, GPU 0: idle 77% of 11.0 s (275 samples of the training thread, every 40 ms, 5 dropped)\n",
		"GPU idle 77% of 11 s: waiting for the data loader at /work/main/examples/idle/slow_loader.py:14 (70%)\n",
		" 70.0%  waiting for the data loader  slow_loader.py:14 (jitter)\n",
		"         12.5% on slow_loader.py:24 (__getitem__)\n",
		"fix: the batch is built in the training process (num_workers=0)",
	} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("missing %q in\n%s", want, o.stdout)
		}
	}
	if o := mustRun(t, "idle", idleRecordings+"healthy.input.json"); !strings.Contains(o.stdout, "no idle finding: the GPU was busy") {
		t.Errorf("healthy run:\n%s", o.stdout)
	}
	var r api.IdleResult
	if err := json.Unmarshal([]byte(mustRun(t, "idle", "--json", idleRecordings+"item_sync.input.json").stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Causes[0].Kind != "sync" || r.Causes[0].Site.Line != 23 || r.Headline == "" {
		t.Errorf("item_sync: %+v", r)
	}
	if o := run("idle", idleRecordings+"healthy.facts.json"); o.code != 2 || !strings.Contains(o.stderr, "not an idle recording") {
		t.Errorf("a facts file: %v", o)
	}
}

// The counters report on the H200 run's readings: a counters recording made
// of the utilisation the slow-loader run recorded (the daemon's NVML
// readings, as `counters --json` writes them) with its stack samples given as
// --idle says what `vramscope idle` says of the same recording: the report
// reads the same readings back from the counters.
func TestCountersWithRecordedStacks(t *testing.T) {
	path := idleRecordings + "slow_loader.input.json"
	var in idle.Input
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &in) != nil {
		t.Fatal(path, err)
	}
	var lines strings.Builder
	for _, u := range in.Util {
		s := map[string]any{"time_ms": u.TimeMS, "device": in.Device, "util_gpu_pct": u.GPU}
		if u.SMActive >= 0 {
			s["gpm"] = map[string]any{"sm_active_pct": u.SMActive}
		}
		line, _ := json.Marshal(map[string]any{"sample": s})
		lines.Write(append(line, '\n'))
	}
	rec := filepath.Join(t.TempDir(), "counters.jsonl")
	os.WriteFile(rec, []byte(lines.String()), 0o644)
	want := mustRun(t, "idle", path).stdout
	o := mustRun(t, "counters", rec, "--idle", path).stdout
	if !strings.Contains(o, "(stack samples from "+path+"):\n"+want) {
		t.Errorf("counters --idle:\n%s\nwant the idle report\n%s", o, want)
	}
	if !strings.Contains(o, "    by line: GPU idle 7") {
		t.Errorf("no finding under a phase:\n%s", o)
	}
}
