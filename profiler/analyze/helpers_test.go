package analyze_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// The real snapshots: the shared fixtures (recorded by ../shared/fixtures/trainer)
// and the examples the repository ships (recorded by examples/record).
var (
	fixtureDir = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots")
	exampleDir = filepath.Join("..", "..", "examples", "snapshots")
	// findingDir holds the cases recorded for the findings engine
	// (examples/record/record_findings.py).
	findingDir = filepath.Join(exampleDir, "findings")
)

// findingCases are the recordings of examples/record/record_findings.py.
var findingCases = []string{"leak_graph", "leak_infer", "frag_oom", "frag_oom_expandable", "cache_growth",
	"activation_oom", "attn_oom", "healthy_mlp", "cache_infer", "healthy_infer"}

type input struct{ name, path string }

// inputs lists every real snapshot the tests use: the small shared fixtures and
// the repository's examples (never the large ones).
func inputs(t *testing.T) []input {
	t.Helper()
	var out []input
	for _, n := range []string{"gpt2_train", "llama_lora_gc", "oom_batch", "gpt2_12l_python_stacks"} {
		out = append(out, input{n, filepath.Join(fixtureDir, n+".pickle")})
	}
	for _, n := range []string{"example_train", "leak_steps", "expandable", "cuda_graph", "agent_gpt2", "agent_oom"} {
		out = append(out, input{n, filepath.Join(exampleDir, n+".pickle")})
	}
	for _, n := range findingCases {
		out = append(out, input{n, filepath.Join(findingDir, n+".pickle")})
	}
	return out
}

func pathOf(t *testing.T, name string) string {
	t.Helper()
	for _, in := range inputs(t) {
		if in.name == name {
			return in.path
		}
	}
	t.Fatalf("no input %q", name)
	return ""
}

// need skips when a snapshot is absent (the shared fixtures live beside the repo).
func need(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		reftool.Missing(t, "snapshot not available: %v", err)
	}
}

var (
	resMu    sync.Mutex
	resCache = map[string]*analyze.Result{}
)

// result analyses a real snapshot once per test binary. Results are shared:
// tests must not modify them.
func result(t *testing.T, name string) *analyze.Result {
	t.Helper()
	path := pathOf(t, name)
	need(t, path)
	resMu.Lock()
	defer resMu.Unlock()
	if r := resCache[name]; r != nil {
		return r
	}
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatalf("analyze %s: %v", path, err)
	}
	resCache[name] = r
	return r
}

// sidecar is the .json beside a snapshot: what the recording run itself measured.
type sidecar struct {
	MaxAllocated int64     `json:"max_allocated"`
	MaxReserved  int64     `json:"max_reserved"`
	StepTimes    []float64 `json:"step_times"`
	Steps        int       `json:"steps"`
	OOMMessage   string    `json:"oom_message"`
	LeakPerStep  int64     `json:"leaked_per_step"`
	NumOOMs      *int      `json:"num_ooms"`
	// record_findings.py
	AfterStep       []int64 `json:"allocated_after_step"`
	DistinctLengths int     `json:"distinct_lengths"`
	CacheBytes      int64   `json:"cache_bytes"`
	Requested       int64   `json:"requested"`
}

func readSidecar(t *testing.T, name string) sidecar {
	t.Helper()
	p := strings.TrimSuffix(pathOf(t, name), ".pickle") + ".json"
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var s sidecar
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return s
}

// pyFacts is what testdata/snaptool.py's plain replay says about a snapshot.
type pyFacts struct {
	File              string         `json:"file"`
	Events            int64          `json:"events"`
	StepMarkers       int            `json:"step_markers"`
	Annotations       int            `json:"annotations"`
	ExpandableSetting bool           `json:"expandable_setting"`
	Devices           []pyDeviceFact `json:"devices"`
}

type pyDeviceFact struct {
	Device              int              `json:"device"`
	Events              int64            `json:"events"`
	Actions             map[string]int64 `json:"actions"`
	Peak                int64            `json:"peak"`
	PeakEvent           int64            `json:"peak_event"`
	PeakTimeUS          *int64           `json:"peak_time_us"`
	PreTraceBytes       int64            `json:"pre_trace_bytes"`
	PreLive             int64            `json:"pre_live"`
	PreLiveNoFrames     int64            `json:"pre_live_noframes"`
	PreFreed            int64            `json:"pre_freed"`
	PreFreedAfterPeak   int64            `json:"pre_freed_after_peak"`
	Allocs              int64            `json:"allocs"`
	AllocBytes          int64            `json:"alloc_bytes"`
	ActiveBytes         int64            `json:"active_bytes"`
	ActiveBlocks        int64            `json:"active_blocks"`
	Reserved            int64            `json:"reserved"`
	MaxReserved         int64            `json:"max_reserved"`
	Segments            int              `json:"segments"`
	ExpandableSegments  int              `json:"expandable_segments"`
	PrivatePoolSegments int              `json:"private_pool_segments"`
	ExternalFree        int64            `json:"external_free"`
	LargestFreeBlock    int64            `json:"largest_free_block"`
	OOMs                []struct {
		Size       int64  `json:"size"`
		DeviceFree uint64 `json:"device_free"`
		User       *struct {
			File     string `json:"file"`
			Line     int    `json:"line"`
			Function string `json:"function"`
		} `json:"user"`
	} `json:"ooms"`
}

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		reftool.Missing(t, "python3 not found: the independent replay needs it")
	}
	return py
}

func snaptool(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python(t), append([]string{filepath.Join("testdata", "snaptool.py")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("snaptool.py %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

var (
	factsMu    sync.Mutex
	factsCache map[string]*pyFacts
)

// facts replays every available real snapshot in Python once per test binary.
func facts(t *testing.T, name string) *pyFacts {
	t.Helper()
	need(t, pathOf(t, name))
	factsMu.Lock()
	defer factsMu.Unlock()
	if factsCache == nil {
		args := []string{"facts"}
		var names []string
		for _, in := range inputs(t) {
			if _, err := os.Stat(in.path); err == nil {
				args = append(args, in.path)
				names = append(names, in.name)
			}
		}
		m := map[string]*pyFacts{}
		for i, f := range parseFacts(t, snaptool(t, args...)) {
			m[names[i]] = f
		}
		factsCache = m
	}
	return factsCache[name]
}

func parseFacts(t *testing.T, out []byte) []*pyFacts {
	t.Helper()
	var list []*pyFacts
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var f pyFacts
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("snaptool output: %v", err)
		}
		list = append(list, &f)
	}
	return list
}

// factsOf replays one file that is not among the cached inputs.
func factsOf(t *testing.T, path string) *pyFacts {
	t.Helper()
	list := parseFacts(t, snaptool(t, "facts", path))
	if len(list) != 1 {
		t.Fatalf("snaptool facts %s: %d results", path, len(list))
	}
	return list[0]
}

// synth writes one of snaptool.py's synthetic snapshots and analyses it.
func synth(t *testing.T, kind string) (*analyze.Result, *pyFacts) {
	t.Helper()
	path := filepath.Join(t.TempDir(), kind+".pickle")
	snaptool(t, "synth", kind, path)
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatalf("analyze %s: %v", kind, err)
	}
	return r, factsOf(t, path)
}

func sumSites(sites []analyze.Site, f func(analyze.Site) int64) int64 {
	var n int64
	for _, s := range sites {
		n += f(s)
	}
	return n
}

func deviceOf(t *testing.T, r *analyze.Result, dev int) analyze.Device {
	t.Helper()
	for _, d := range r.Devices {
		if d.Device == dev {
			return d
		}
	}
	t.Fatalf("%s: no device %d", r.File, dev)
	return analyze.Device{}
}
