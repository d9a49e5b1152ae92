package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/daemontest"
)

// `counters --pid N` through a real daemon: GPU 0 busy 20% while its memory
// is held (an input_starved phase) and process 4242's training thread waits
// in a DataLoader transform. The report says the phase, and under it and
// after it the line; its JSON recording carries the samples, and
// `counters FILE` joins them again into the same finding. Without the
// daemon the counters still run, and say why there is no finding.
func TestCountersIdleByLine(t *testing.T) {
	byLine := regexp.MustCompile(`\n0 .* input_starved .*\n    by line: GPU idle 80% of \d s: waiting for the data loader at /w/data.py:12 \(80%\)\n`)
	socket := daemontest.Start(t).Socket
	frames := []api.StackFrame{{File: "/w/data.py", Line: 12, Func: "jitter"}, {File: "/w/train.py", Line: 40, Func: "main"}}
	batch := func(from, to int64) api.StacksParams { // the agent's samples every 40 ms in (from, to]
		b := api.StacksParams{PeriodMS: 40, Threads: []api.StackThread{{Name: "MainThread", Main: true}}, Frames: frames}
		for t := from + 40 - from%40; t <= to; t += 40 {
			b.Samples = append(b.Samples, api.StackSample{TimeMS: t, Stack: []int{0, 1}, Wait: "dataloader"})
		}
		return b
	}
	last := time.Now().UnixMilli()
	send := daemontest.StackAgent(t, socket, api.RegisterParams{PID: 4242, Host: "test", Argv: []string{"python", "train.py"}}, batch(last-1000, last))
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() { // a batch every 200 ms, as the agent sends them (every second)
		for tick := time.NewTicker(200 * time.Millisecond); ; {
			select {
			case <-stop:
				tick.Stop()
				return
			case <-tick.C:
				now := time.Now().UnixMilli()
				send(batch(last, now))
				last = now
			}
		}
	}()

	withSampler(t, &fakeGPUs{util0: 20})
	var out, errb bytes.Buffer
	if code := Main([]string{"counters", "--interval", "50ms", "--duration", "2500ms", "--pid", "4242", "--socket", socket}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	o := out.String()
	if !byLine.MatchString(o) {
		t.Errorf("no idle finding under the input_starved phase:\n%s", o)
	}
	for _, want := range []string{
		"\nphases:\n", " input_starved ",
		"\nidle by line (stack samples of process 4242 from the daemon):\n",
		" 80.0%  waiting for the data loader  data.py:12 (jitter)\n",
		"fix: the batch is built in the training process (num_workers=0)",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("missing %q in\n%s", want, o)
		}
	}

	out.Reset()
	withSampler(t, &fakeGPUs{util0: 20})
	if code := Main([]string{"counters", "--json", "--interval", "50ms", "--duration", "2500ms", "--pid", "4242", "--socket", socket}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	os.WriteFile(rec, out.Bytes(), 0o644)
	var file, again bytes.Buffer
	if code := Main([]string{"counters", rec}, &file, &errb); code != 0 {
		t.Fatalf("counters FILE: exit %d: %s", code, errb.String())
	}
	if f := file.String(); !strings.Contains(f, "(stack samples from the recording)") || !byLine.MatchString(f) {
		t.Errorf("the recording's idle finding:\n%s", f)
	}
	if code := Main([]string{"counters", "--json", rec}, &again, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	var r countersReport
	if err := json.Unmarshal(again.Bytes(), &r); err != nil || r.Idle == nil || len(r.Phases) == 0 {
		t.Fatalf("counters FILE --json: %v\n%s", err, again.String())
	}
	if c := r.Idle.Causes[0]; c.Kind != "data_loader" || c.Site.Line != 12 || r.Idle.Input != nil || len(r.IdleByPhase) == 0 || r.IdleByPhase[0].Cause == nil {
		t.Errorf("idle %+v, by phase %+v", r.Idle, r.IdleByPhase)
	}

	out.Reset()
	withSampler(t, &fakeGPUs{util0: 20})
	if code := Main([]string{"counters", "--duration", "300ms", "--pid", "4242", "--socket", filepath.Join(t.TempDir(), "none.sock")}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "\nidle by line: ") || !strings.Contains(out.String(), "start one with `vramscope serve`") {
		t.Errorf("no daemon: exit %d\n%s", code, out.String())
	}
}

// Phases keep working without stack samples: a recording without an idle
// line reads as before, and --idle with a file that is no idle recording is
// bad input naming it.
func TestCountersFileWithoutSamples(t *testing.T) {
	rec := filepath.Join("..", "..", "..", "profiler", "gpuphase", "testdata", "h200", "nvml.jsonl")
	var out, errb bytes.Buffer
	if code := Main([]string{"counters", rec}, &out, &errb); code != 0 || strings.Contains(out.String(), "idle by line") ||
		!strings.Contains(out.String(), " pcie_transfer ") {
		t.Errorf("exit %d:\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := Main([]string{"counters", rec, "--idle", rec}, &out, &errb); code != exitInput || !strings.Contains(errb.String(), "nvml.jsonl: not an idle recording") {
		t.Errorf("--idle with a counters file: exit %d, %s", code, errb.String())
	}
	if code := Main([]string{"counters", rec, "--pid", "7"}, &out, &errb); code != exitInput {
		t.Errorf("--pid with a FILE: exit %d", code)
	}
}
