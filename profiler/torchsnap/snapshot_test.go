package torchsnap

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

var (
	fixtureDir = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots")
	exampleDir = filepath.Join("..", "..", "examples", "snapshots")
	variantDir = "testdata"
)

// snapshotFiles lists every real fixture, shipped example and generated variant.
func snapshotFiles(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, pat := range []string{
		filepath.Join(fixtureDir, "*.pickle"),
		filepath.Join(exampleDir, "*.pickle"),
		filepath.Join(variantDir, "*.pickle"),
	} {
		m, _ := filepath.Glob(pat)
		if len(m) == 0 {
			t.Fatalf("no files match %s", pat)
		}
		paths = append(paths, m...)
	}
	return paths
}

var (
	factsOnce sync.Once
	factsAll  map[string]*snapFacts
	factsErr  error
)

// factsFor returns what Python finds in path; Python runs once for all files.
func factsFor(t *testing.T, path string) *snapFacts {
	t.Helper()
	factsOnce.Do(func() { factsAll, factsErr = pythonFacts(snapshotFiles(t)) })
	if factsErr != nil {
		t.Fatal(factsErr)
	}
	f, ok := factsAll[path]
	if !ok {
		t.Fatalf("python3 gave no facts for %s", path)
	}
	return f
}

type decoded struct {
	snap *Snapshot
	fr   *profiler.Frames
	col  *collector
}

func readAll(t *testing.T, path string) decoded {
	t.Helper()
	fr := profiler.NewFrames()
	col := newCollector(fr)
	snap, err := ReadFile(path, fr, col.onEvent, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return decoded{snap, fr, col}
}

func num(v any) uint64 {
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return n
		}
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return uint64(n)
		}
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

// TestSnapshotsMatchPython decodes every fixture, example and variant and
// compares everything with what Python finds (pyFacts): per-trace event
// counts by action, every event (through a digest) and a sample of events
// field by field with their stacks, every segment, every block with its
// stack, sizes per block state, annotations and settings.
func TestSnapshotsMatchPython(t *testing.T) {
	for _, path := range snapshotFiles(t) {
		name := filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			py := factsFor(t, path)
			d := readAll(t, path)
			compareTraces(t, py, d)
			compareSegments(t, py, d)
			compareBlocks(t, py, d)
			compareRest(t, py, d)
		})
	}
}

func compareTraces(t *testing.T, py *snapFacts, d decoded) {
	t.Helper()
	s := d.snap
	var nonEmpty []int
	for dev, tr := range py.Traces {
		if tr.Len > 0 {
			nonEmpty = append(nonEmpty, dev)
		}
	}
	if fmt.Sprint(s.TraceDevices) != fmt.Sprint(nonEmpty) {
		t.Fatalf("TraceDevices %v, want the devices with events %v", s.TraceDevices, nonEmpty)
	}
	if len(s.TraceEvents) != len(s.TraceDevices) {
		t.Fatalf("%d TraceEvents for %d traces", len(s.TraceEvents), len(s.TraceDevices))
	}
	for tr, dev := range s.TraceDevices {
		want, got := py.Traces[dev], d.col.traces[tr]
		if got == nil {
			t.Fatalf("trace %d (device %d): no events streamed", tr, dev)
		}
		if s.TraceEvents[tr] != int64(want.Len) || len(got.events) != want.Len {
			t.Errorf("trace %d: %d events streamed, TraceEvents %d, Python %d", tr, len(got.events), s.TraceEvents[tr], want.Len)
		}
		if fmt.Sprint(got.actions) != fmt.Sprint(want.Actions) {
			t.Errorf("trace %d: actions %v, Python %v", tr, got.actions, want.Actions)
		}
		for _, w := range want.Sample {
			if w.I >= len(got.events) {
				t.Errorf("trace %d: no event %d", tr, w.I)
				continue
			}
			e := got.events[w.I]
			if e.Action.String() != w.Action || e.Addr != w.Addr || e.Size != w.Size || e.DeviceFree != w.DeviceFree {
				t.Errorf("trace %d event %d: %s addr %d size %d device_free %d; Python %s %d %d %d",
					tr, w.I, e.Action, e.Addr, e.Size, e.DeviceFree, w.Action, w.Addr, w.Size, w.DeviceFree)
			}
			if g, p := stackKey(d.fr, e.Stack), pyStackKey(py.Stacks[w.Stack]); g != p {
				t.Errorf("trace %d event %d: stack\n%q\nPython's frames\n%q", tr, w.I, g, p)
			}
		}
		if got := d.col.digest(tr); got != want.Digest {
			t.Errorf("trace %d: the events differ from Python's somewhere (digest %s, Python %s)", tr, got[:12], want.Digest[:12])
		}
	}
}

func compareSegments(t *testing.T, py *snapFacts, d decoded) {
	t.Helper()
	segs := d.snap.Segments
	if len(segs) != len(py.Segments) {
		t.Fatalf("%d segments, Python %d", len(segs), len(py.Segments))
	}
	for i, w := range py.Segments {
		s := segs[i]
		got := []any{uint64(s.Device), s.Addr, s.TotalSize, s.Allocated, s.Active, s.Requested, uint64(s.Stream), s.Type,
			uint64(s.PoolID[0]), uint64(s.PoolID[1]), s.Expandable, uint64(len(s.Blocks))}
		want := []any{num(w[0]), num(w[1]), num(w[2]), num(w[3]), num(w[4]), num(w[5]), num(w[6]), w[7],
			num(w[8]), num(w[9]), w[10], num(w[11])}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("segment %d: %v\nPython:     %v", i, got, want)
		}
	}
}

// compareBlocks checks every block; mismatches are reported per kind of block
// (modern layout, one-entry history, several-entry history, no history) so a
// failure names the layout at fault.
func compareBlocks(t *testing.T, py *snapFacts, d decoded) {
	t.Helper()
	var blocks []profiler.Block
	var segOf []int
	for i, s := range d.snap.Segments {
		for _, b := range s.Blocks {
			blocks = append(blocks, b)
			segOf = append(segOf, i)
		}
	}
	if len(blocks) != len(py.Blocks) {
		t.Fatalf("%d blocks, Python %d", len(blocks), len(py.Blocks))
	}
	bad := map[string][]string{}
	kinds := map[string]int{}
	for i, w := range py.Blocks {
		b := blocks[i]
		kinds[w.Kind]++
		var why []string
		if segOf[i] != w.Seg || b.Addr != w.Addr || b.Size != w.Size || b.State.String() != canonState(w.State) {
			why = append(why, fmt.Sprintf("segment %d addr %#x size %d %s; Python segment %d addr %#x size %d %s",
				segOf[i], b.Addr, b.Size, b.State, w.Seg, w.Addr, w.Size, w.State))
		}
		if w.Requested >= 0 && b.Requested != uint64(w.Requested) {
			why = append(why, fmt.Sprintf("requested %d; Python %d", b.Requested, w.Requested))
		}
		if g, p := stackKey(d.fr, b.Stack), pyStackKey(py.Stacks[w.Stack]); g != p {
			why = append(why, fmt.Sprintf("stack %q; Python %q", g, p))
		}
		if len(why) > 0 {
			bad[w.Kind] = append(bad[w.Kind], fmt.Sprintf("block %d: %s", i, strings.Join(why, "; ")))
		}
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, kind := range names {
		t.Run("blocks_"+kind, func(t *testing.T) {
			if msgs := bad[kind]; len(msgs) > 0 {
				t.Errorf("%d of %d %s blocks differ from PyTorch's reading (_block_extra), first: %s",
					len(msgs), kinds[kind], kind, msgs[0])
			}
		})
	}
	// Sizes per state.
	sums := map[string][2]uint64{}
	for _, b := range blocks {
		s := sums[b.State.String()]
		s[0]++
		s[1] += b.Size
		sums[b.State.String()] = s
	}
	want := map[string][2]uint64{}
	for k, v := range py.States {
		s := want[canonState(k)]
		s[0] += v[0]
		s[1] += v[1]
		want[canonState(k)] = s
	}
	if fmt.Sprint(sums) != fmt.Sprint(want) {
		t.Errorf("blocks per state [count bytes]: %v, Python %v", sums, want)
	}
}

func canonState(s string) string { return profiler.ParseBlockState(s).String() }

func compareRest(t *testing.T, py *snapFacts, d decoded) {
	t.Helper()
	s := d.snap
	if s.Legacy != py.Legacy {
		t.Errorf("Legacy %v, want %v", s.Legacy, py.Legacy)
	}
	if len(s.Annotations) != len(py.Annotations) {
		t.Errorf("%d annotations, Python %d", len(s.Annotations), len(py.Annotations))
	} else {
		for i, w := range py.Annotations {
			a := s.Annotations[i]
			if a.Name != w[0] || a.Start != w[1] || uint64(a.Device) != num(w[2]) || uint64(a.TimeUS) != num(w[3]) {
				t.Errorf("annotation %d: %+v, Python %v", i, a, w)
				break
			}
		}
	}
	if len(py.Settings) == 0 {
		if len(s.Settings.Raw) != 0 {
			t.Errorf("settings %v where the snapshot has none", s.Settings.Raw)
		}
		return
	}
	if v, _ := py.Settings["PYTORCH_CUDA_ALLOC_CONF"].(string); s.Settings.AllocConf != v {
		t.Errorf("AllocConf %q, Python %q", s.Settings.AllocConf, v)
	}
	if v, _ := py.Settings["expandable_segments"].(bool); s.Settings.ExpandableSegments != v {
		t.Errorf("ExpandableSegments %v, Python %v", s.Settings.ExpandableSegments, v)
	}
	if v := fmt.Sprint(py.Settings["max_split_size"]); strconv.FormatInt(s.Settings.MaxSplitSize, 10) != v {
		t.Errorf("MaxSplitSize %d, Python %s", s.Settings.MaxSplitSize, v)
	}
	for k, v := range py.Settings {
		got, ok := s.Settings.Raw[k]
		want := fmt.Sprint(v)
		if n, isNum := v.(json.Number); isNum {
			f, _ := n.Float64()
			want = fmt.Sprint(f)
			if i, err := n.Int64(); err == nil {
				want = fmt.Sprint(i)
			}
		}
		if !ok || got != want {
			t.Errorf("setting %s = %q, Python %q", k, got, want)
		}
	}
	if len(s.Settings.Raw) != len(py.Settings) {
		t.Errorf("%d raw settings, Python %d", len(s.Settings.Raw), len(py.Settings))
	}
}

// TestFixtureCounts checks the Go decoding against the numbers the fixtures'
// README states, independently of Python.
func TestFixtureCounts(t *testing.T) {
	want := map[string]struct {
		events, segments int
		actions          map[string]int
	}{
		"gpt2_train":             {9133, 76, map[string]int{"alloc": 3127, "free_requested": 2971, "free_completed": 2971, "segment_alloc": 64}},
		"llama_lora_gc":          {13458, 35, map[string]int{"alloc": 4527, "free_requested": 4456, "free_completed": 4456, "segment_alloc": 19}},
		"oom_batch":              {5071, 73, map[string]int{"alloc": 1899, "free_requested": 1554, "free_completed": 1554, "segment_alloc": 62, "segment_free": 1, "oom": 1}},
		"gpt2_12l_python_stacks": {34393, 154, map[string]int{"alloc": 11464, "free_requested": 11464, "free_completed": 11464, "snapshot": 1}},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			d := readAll(t, filepath.Join(fixtureDir, name+".pickle"))
			s := d.snap
			if len(s.TraceEvents) != 1 || s.TraceEvents[0] != int64(w.events) || len(s.Segments) != w.segments {
				t.Fatalf("trace events %v, %d segments; want [%d], %d", s.TraceEvents, len(s.Segments), w.events, w.segments)
			}
			if got := fmt.Sprint(d.col.traces[0].actions); got != fmt.Sprint(w.actions) {
				t.Fatalf("actions %s, want %v", got, w.actions)
			}
		})
	}
}

// TestOOMEntry checks the OOM entry of the real OOM fixture and of the
// variant: DeviceFree and Size are kept, Addr is zero, and the stack is there.
func TestOOMEntry(t *testing.T) {
	for _, path := range []string{filepath.Join(fixtureDir, "oom_batch.pickle"), filepath.Join(variantDir, "variants.pickle")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			py := factsFor(t, path)
			d := readAll(t, path)
			var ooms []profiler.Event
			for _, e := range d.col.traces[0].events {
				if e.Action == profiler.ActOOM {
					ooms = append(ooms, e)
				}
			}
			var want []int
			for _, s := range py.Traces[0].Sample {
				if s.Action == "oom" {
					want = append(want, s.I)
					e := d.col.traces[0].events[s.I]
					if e.Action != profiler.ActOOM || e.DeviceFree != s.DeviceFree || e.Size != s.Size || e.Addr != 0 || e.DeviceFree == 0 || e.Size == 0 {
						t.Errorf("OOM event %d: %+v, Python device_free %d size %d", s.I, e, s.DeviceFree, s.Size)
					}
					if e.Stack == 0 {
						t.Errorf("OOM event %d has no stack", s.I)
					}
				}
			}
			if len(ooms) != 1 || len(want) != 1 {
				t.Fatalf("%d OOM events, Python %d", len(ooms), len(want))
			}
		})
	}
	d := readAll(t, filepath.Join(variantDir, "variants.pickle"))
	for _, e := range d.col.traces[0].events {
		if e.Action == profiler.ActOOM && (e.DeviceFree != 123456789 || e.Size != 1<<33+5) {
			t.Errorf("variant OOM event: device_free %d size %d, want 123456789 and %d", e.DeviceFree, e.Size, uint64(1<<33+5))
		}
	}
}
