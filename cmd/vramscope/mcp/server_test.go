package mcp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/vramscope/vramscope/cmd/vramscope/mcp"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/internal/daemontest"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// bin is vramscope built from this checkout: the tests drive the real
// subcommand over stdio, as an assistant starts it.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptest")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "vramscope")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// session starts `vramscope mcp --socket socket` and connects the SDK's client.
func session(t *testing.T, socket string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: exec.Command(bin, "mcp", "--socket", socket)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its text and whether it is an error.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func noSocket(t *testing.T) string { return filepath.Join(t.TempDir(), "none.sock") }

// TestWhyOOM asks why a real out-of-memory snapshot failed: the summary
// names the failing request, the cause and its line, and the top line, as
// the engine finds them (examples/snapshots/expected_findings.json labels
// agent_oom large_allocation at examples/e2e/train.py:28).
func TestWhyOOM(t *testing.T) {
	file, _ := filepath.Abs("../../../examples/snapshots/agent_oom.pickle")
	res, err := analyze.Run(file, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := call(t, session(t, noSocket(t)), "analyze_snapshot", map[string]any{"snapshot": file})
	if isErr {
		t.Fatal(text)
	}
	for _, want := range []string{"Out of memory on device", res.Findings[0].Title, "cause: large_allocation", "train.py:28",
		fmt.Sprintf("%s:%d", filepath.Base(res.Sites[0].File), res.Sites[0].Line), "fix: "} {
		if !strings.Contains(text, want) {
			t.Errorf("the summary lacks %q:\n%s", want, text)
		}
	}
	if len(text) > 6000 {
		t.Errorf("the summary is %d bytes; a model reads it first, it should be short", len(text))
	}
}

// TestDetails: each detail answers its section, an unknown one is refused
// naming the details there are, and a missing file is named.
func TestDetails(t *testing.T) {
	cs := session(t, noSocket(t))
	file, _ := filepath.Abs("../../../examples/snapshots/leak_steps.pickle")
	for detail, want := range map[string]string{"lines": "Top lines at the peak", "steps": "Steps (8, from annotations)",
		"findings": "leak", "categories": "Memory at the peak by category", "allocator": "reserved in", "stacks": "Top stacks"} {
		text, isErr := call(t, cs, "analyze_snapshot", map[string]any{"snapshot": file, "detail": detail, "top": 3})
		if isErr || !strings.Contains(text, want) {
			t.Errorf("detail %s: want %q, got (error %v):\n%s", detail, want, isErr, text)
		}
	}
	text, isErr := call(t, cs, "analyze_snapshot", map[string]any{"snapshot": file, "detail": "everything"})
	if !isErr || !strings.Contains(text, "summary, lines") {
		t.Errorf("an unknown detail: %v %s", isErr, text)
	}
	text, isErr = call(t, cs, "analyze_snapshot", map[string]any{"snapshot": "/no/such/snap.pickle"})
	if !isErr || !strings.Contains(text, "/no/such/snap.pickle") {
		t.Errorf("a missing file: %v %s", isErr, text)
	}
}

// TestNoDaemon: the tools that need the daemon say that none runs and how
// to start one; none is started.
func TestNoDaemon(t *testing.T) {
	sock := noSocket(t)
	cs := session(t, sock)
	for _, tool := range []string{"list_snapshots", "list_processes"} {
		text, isErr := call(t, cs, tool, nil)
		if !isErr || !strings.Contains(text, "no vramscope daemon runs at "+sock) || !strings.Contains(text, "vramscope serve") {
			t.Errorf("%s without a daemon: %v %s", tool, isErr, text)
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("a daemon was started at %s", sock)
	}
}

// TestDiff compares two real snapshots of one script by file.
func TestDiff(t *testing.T) {
	a, _ := filepath.Abs("../../../examples/snapshots/example_train.pickle")
	b, _ := filepath.Abs("../../../examples/snapshots/leak_steps.pickle")
	ra, _ := analyze.Run(a, analyze.Options{})
	rb, _ := analyze.Run(b, analyze.Options{})
	d := analyze.Compare(ra, rb)
	text, isErr := call(t, session(t, noSocket(t)), "diff_snapshots", map[string]any{"before": a, "after": b, "top": 3})
	want := fmt.Sprintf("Peak %s -> %s", mcp.FormatBytes(d.PeakA), mcp.FormatBytes(d.PeakB))
	if isErr || !strings.Contains(text, want) || !strings.Contains(text, "1. ") {
		t.Errorf("want %q and lines, got:\n%s", want, text)
	}
}

// TestWithDaemon: a real daemon and a fake agent that dumps a real snapshot:
// processes, take_snapshot, list_snapshots, the analysis by id and the
// resources of the stored snapshot.
func TestWithDaemon(t *testing.T) {
	d := daemontest.Start(t)
	src, _ := filepath.Abs("../../../examples/snapshots/agent_oom.pickle")
	daemontest.Agent(t, d.Socket, api.RegisterParams{PID: 4242, Host: "h", Argv: []string{"train.py"}, APIVersion: api.Version, Recording: true}, src)
	waitAgent(t, d.Socket, 4242)
	cs := session(t, d.Socket)
	if text, _ := call(t, cs, "list_processes", nil); !strings.Contains(text, "- 4242 agent=true") || !strings.Contains(text, "train.py") {
		t.Fatalf("list_processes:\n%s", text)
	}
	text, isErr := call(t, cs, "take_snapshot", map[string]any{"pid": 4242, "label": "why"})
	if isErr {
		t.Fatal(text)
	}
	id := strings.Fields(strings.TrimPrefix(text, "Stored snapshot "))[0]
	if list, _ := call(t, cs, "list_snapshots", nil); !strings.Contains(list, id) || !strings.Contains(list, "(why)") {
		t.Errorf("list_snapshots lacks %s:\n%s", id, list)
	}
	if sum, isErr := call(t, cs, "analyze_snapshot", map[string]any{"snapshot": id}); isErr || !strings.Contains(sum, "cause: large_allocation") {
		t.Errorf("analysis of %s by id:\n%s", id, sum)
	}
	ctx := context.Background()
	rep, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "vramscope://reports/" + id})
	if err != nil || !strings.Contains(rep.Contents[0].Text, "train.py:28") {
		t.Errorf("report resource: %v %+v", err, rep)
	}
	meta, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "vramscope://snapshots/" + id})
	if err != nil || !strings.Contains(meta.Contents[0].Text, `"pid": 4242`) {
		t.Errorf("snapshot resource: %v %+v", err, meta)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "vramscope://snapshots/nope"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an unknown id: %v", err)
	}
}

func waitAgent(t *testing.T, socket string, pid int) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, socket, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var res api.ProcessListResult
		if err := c.Call(ctx, api.ProcessList, nil, &res); err == nil {
			for _, p := range res.Processes {
				if p.PID == pid && p.Agent {
					return
				}
			}
		}
	}
	t.Fatalf("agent %d did not register", pid)
}

// TestRankView: the two ranks of a real torchrun job (examples/ranks), rank 1
// with three times the batch: the view names rank 1 as the outlier, with the
// engine's imbalance.
func TestRankView(t *testing.T) {
	dir, _ := filepath.Abs("../../../examples/ranks/out/snapshots")
	files := []string{filepath.Join(dir, "rank0.pickle"), filepath.Join(dir, "rank1.pickle")}
	var snaps []analyze.RankSnapshot
	for i, f := range files {
		res, err := analyze.Run(f, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, analyze.RankSnapshot{Rank: i, Source: f, Result: res, Device: -1})
	}
	rv, err := analyze.CompareRanks(snaps)
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := call(t, session(t, noSocket(t)), "rank_view", map[string]any{"files": files})
	want := fmt.Sprintf("imbalance %.2f (max/median peak, rank %d)", rv.Imbalance, rv.MaxRank)
	if isErr || !strings.Contains(text, want) || !strings.Contains(text, "rank 1: peak") || !strings.Contains(text, "OUTLIER") {
		t.Errorf("want %q and rank 1 an outlier:\n%s", want, text)
	}
}

// TestWhatFits: GPT-2 at batch 2, 4 and 8 (examples/snapshots/whatif) on a
// 141 GiB device: the largest batch that fits is the engine's.
func TestWhatFits(t *testing.T) {
	var snaps []map[string]any
	var pts []analyze.WhatIfPoint
	for _, bs := range []int{2, 4, 8} {
		f, _ := filepath.Abs(fmt.Sprintf("../../../examples/snapshots/whatif/whatif_bs%d.pickle", bs))
		res, err := analyze.Run(f, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pts = append(pts, analyze.WhatIfPointOf(res, float64(bs)))
		snaps = append(snaps, map[string]any{"snapshot": f, "size": bs})
	}
	const device = 150109880320 // the H200's total the recording's script read
	w, err := analyze.FitWhatIf(pts, analyze.WhatIfOptions{DeviceMemory: device, Overhead: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := call(t, session(t, noSocket(t)), "what_fits", map[string]any{"snapshots": snaps, "device_memory": device})
	if want := fmt.Sprintf("): %d.", w.MaxSize); isErr || !strings.Contains(text, want) || w.MaxSize < 8 {
		t.Errorf("want the largest size %d:\n%s", w.MaxSize, text)
	}
	text, isErr = call(t, session(t, noSocket(t)), "what_fits", map[string]any{"snapshots": snaps[:1]})
	if !isErr || !strings.Contains(text, "two or more sizes") {
		t.Errorf("one snapshot: %v %s", isErr, text)
	}
}
