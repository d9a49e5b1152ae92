package synth

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

var fixtures = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots")

// entry is a trace entry as both decoders see it.
type entry struct {
	Action     string      `json:"action"`
	Addr       uint64      `json:"addr"`
	DeviceFree uint64      `json:"device_free"`
	Size       uint64      `json:"size"`
	Stream     int64       `json:"stream"`
	TimeUS     int64       `json:"time_us"`
	UserMeta   string      `json:"user_metadata"`
	Frames     [][3]any    `json:"frames"` // file, line, function
	frames     [][3]string // normalised for comparison
}

func (e *entry) norm() {
	e.frames = nil
	for _, f := range e.Frames {
		e.frames = append(e.frames, [3]string{fmt.Sprint(f[0]), fmt.Sprint(f[1]), fmt.Sprint(f[2])})
	}
	e.Frames = nil
}

// pyRead is what CPython's pickle.load finds in a snapshot.
const pyRead = `
import json, pickle, sys, collections
d = pickle.load(open(sys.argv[1], 'rb'))
t = d['device_traces'][0]
def ent(e):
    return {'action': e['action'], 'addr': e.get('addr', 0), 'device_free': e.get('device_free', 0),
            'size': e['size'], 'stream': e['stream'], 'time_us': e['time_us'],
            'user_metadata': e['user_metadata'],
            'frames': [[f['filename'], f['line'], f['name']] for f in e.get('frames', [])], 'keys': list(e)}
keys = collections.Counter(tuple(e.keys()) for e in t)
json.dump({'n': len(t), 'top': list(d), 'devices': len(d['device_traces']),
           'actions': collections.Counter(e['action'] for e in t),
           'keys': [list(k) for k in keys], 'head': [ent(e) for e in t[:100]], 'tail': [ent(e) for e in t[-100:]],
           'settings': sorted(d['allocator_settings']), 'max_split_size': d['allocator_settings'].get('max_split_size'),
           'segments': len(d['segments']), 'annotations': len(d['external_annotations'])}, sys.stdout)
`

type pyView struct {
	N           int64            `json:"n"`
	Top         []string         `json:"top"`
	Devices     int              `json:"devices"`
	Actions     map[string]int64 `json:"actions"`
	Keys        [][]string       `json:"keys"`
	Head, Tail  []entry
	Settings    []string `json:"settings"`
	MaxSplit    *int64   `json:"max_split_size"`
	Segments    int      `json:"segments"`
	Annotations int64    `json:"annotations"`
}

func pyLoad(t *testing.T, path string) *pyView {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	out, err := exec.Command(py, "-c", pyRead, path).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("python3 pickle.load: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var v pyView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	for i := range v.Head {
		v.Head[i].norm()
	}
	for i := range v.Tail {
		v.Tail[i].norm()
	}
	return &v
}

// goView reads a snapshot with the Go decoder: its first and last 100
// device-0 entries and the count of each action.
type goView struct {
	snap       *torchsnap.Snapshot
	head, tail []entry
	actions    map[string]int64
	n          int64
}

func goLoad(t *testing.T, path string) *goView {
	t.Helper()
	frames := profiler.NewFrames()
	v := &goView{actions: map[string]int64{}}
	var ring []profiler.Event  // the last 100 events (every fixture has one device)
	var evs [][]profiler.Event // per trace: the first 100
	var counts []int64
	var acts []map[string]int64
	snap, err := torchsnap.ReadFile(path, frames, func(trace int, e *profiler.Event) error {
		for trace >= len(evs) {
			evs = append(evs, nil)
			counts = append(counts, 0)
			acts = append(acts, map[string]int64{})
		}
		acts[trace][e.Action.String()]++
		if counts[trace] < 100 {
			evs[trace] = append(evs[trace], *e)
		}
		if len(ring) == 200 {
			ring = append(ring[:0], ring[100:]...)
		}
		ring = append(ring, *e)
		counts[trace]++
		return nil
	}, torchsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v.snap = snap
	conv := func(e profiler.Event) entry {
		x := entry{Action: e.Action.String(), Addr: e.Addr, DeviceFree: e.DeviceFree, Size: e.Size, Stream: e.Stream,
			TimeUS: e.TimeUS, UserMeta: e.UserMeta}
		for _, f := range frames.StackAt(e.Stack) {
			fr := frames.FrameAt(f)
			x.frames = append(x.frames, [3]string{fr.File, fmt.Sprint(fr.Line), fr.Func})
		}
		return x
	}
	for tr, d := range snap.TraceDevices {
		if d != 0 {
			continue
		}
		v.n, v.actions = counts[tr], acts[tr]
		for _, e := range evs[tr] {
			v.head = append(v.head, conv(e))
		}
	}
	// The tail: the last 100 events of device 0 (every fixture has one device).
	if len(snap.TraceDevices) == 1 {
		for _, e := range ring[max(0, len(ring)-100):] {
			v.tail = append(v.tail, conv(e))
		}
	}
	return v
}

func sameEntries(t *testing.T, what string, got, want []entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: entry %d:\n got %+v\nwant %+v", what, i, got[i], want[i])
		}
	}
}

func TestGenerateFromGPT2(t *testing.T) {
	src := filepath.Join(fixtures, "gpt2_train.pickle")
	const n = 50_000
	out := filepath.Join(t.TempDir(), "synth.pickle")
	res, err := GenerateFile(out, src, Options{Entries: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *res)
	if res.Entries != n || res.Reps < 5 {
		t.Fatalf("wrote %d entries in %d repetitions", res.Entries, res.Reps)
	}

	py := pyLoad(t, out)
	if py.N != n {
		t.Fatalf("python counts %d entries, want %d", py.N, n)
	}
	if want := []string{"segments", "device_traces", "allocator_settings", "external_annotations"}; !reflect.DeepEqual(py.Top, want) {
		t.Errorf("top-level keys %v, want %v", py.Top, want)
	}
	wantKeys := []string{"action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata", "frames"}
	if len(py.Keys) != 1 || !reflect.DeepEqual(py.Keys[0], wantKeys) {
		t.Errorf("entry keys %v, want %v", py.Keys, wantKeys)
	}
	if py.MaxSplit == nil || *py.MaxSplit != -1 || len(py.Settings) < 3 {
		t.Errorf("allocator_settings %v, max_split_size %v", py.Settings, py.MaxSplit)
	}
	if !reflect.DeepEqual(py.Actions, res.Actions) {
		t.Errorf("python counts actions %v, the generator %v", py.Actions, res.Actions)
	}

	gv := goLoad(t, out)
	if gv.n != n || !reflect.DeepEqual(gv.actions, res.Actions) {
		t.Errorf("Go decoder: %d entries, actions %v; generator %v", gv.n, gv.actions, res.Actions)
	}
	sameEntries(t, "first 100, Go vs python", gv.head, py.Head)
	sameEntries(t, "last 100, Go vs python", gv.tail, py.Tail)

	// The last repetition is the source itself: same tail, same segments.
	sv := goLoad(t, src)
	sameEntries(t, "last 100, synth vs source", gv.tail, sv.tail)
	if len(gv.snap.Segments) != len(sv.snap.Segments) || py.Segments != len(sv.snap.Segments) {
		t.Errorf("%d segments (python %d), source %d", len(gv.snap.Segments), py.Segments, len(sv.snap.Segments))
	}
	for i := range gv.snap.Segments {
		g, s := gv.snap.Segments[i], sv.snap.Segments[i]
		if g.Addr != s.Addr || g.TotalSize != s.TotalSize || len(g.Blocks) != len(s.Blocks) || g.Allocated != s.Allocated {
			t.Fatalf("segment %d: %+v, source %+v", i, g, s)
		}
	}
	if gv.snap.Settings.MaxSplitSize != sv.snap.Settings.MaxSplitSize || !reflect.DeepEqual(gv.snap.Settings.Raw, sv.snap.Settings.Raw) {
		t.Errorf("settings %+v, source %+v", gv.snap.Settings, sv.snap.Settings)
	}
	if want := int64(min(res.Reps, 100) * len(sv.snap.Annotations)); py.Annotations > want || py.Annotations < want-int64(len(sv.snap.Annotations)) || py.Annotations != res.Annotations {
		t.Errorf("%d annotations (generator says %d), want about %d", py.Annotations, res.Annotations, want)
	}

	// Per-action counts grow with the number of repetitions; segment events
	// come once.
	f := float64(n) / float64(res.PerRep)
	for _, a := range []string{"alloc", "free_requested", "free_completed"} {
		want := f * float64(sv.actions[a])
		if got := float64(res.Actions[a]); got < 0.9*want || got > 1.1*want {
			t.Errorf("%d %s, source %d × %.2f repetitions = %.0f", res.Actions[a], a, sv.actions[a], f, want)
		}
	}
	if res.Actions["segment_alloc"] != sv.actions["segment_alloc"] {
		t.Errorf("%d segment_alloc, source %d", res.Actions["segment_alloc"], sv.actions["segment_alloc"])
	}

	// The analyser reads it, and the peak is the source's: the same steps run
	// again with the live set reset between repetitions.
	rs, err := analyze.Run(src, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := analyze.Run(out, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Events != n {
		t.Errorf("analyser counts %d events", ro.Events)
	}
	if ro.Peak.Bytes != rs.Peak.Bytes {
		t.Errorf("peak %d bytes, source %d", ro.Peak.Bytes, rs.Peak.Bytes)
	}
	if ro.Devices[0].Allocator.Reserved != rs.Devices[0].Allocator.Reserved {
		t.Errorf("reserved %d, source %d", ro.Devices[0].Allocator.Reserved, rs.Devices[0].Allocator.Reserved)
	}
}

// Every fixture, at a size that cuts into a repetition, loads in python and
// in the analyser with exactly the entries asked for.
func TestGenerateFixtures(t *testing.T) {
	for _, name := range []string{"oom_batch", "gpt2_12l_python_stacks", "llama_lora_gc"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(fixtures, name+".pickle")
			sv := goLoad(t, src)
			for _, n := range []int64{sv.n / 2, sv.n, sv.n*5/2 + 7} {
				out := filepath.Join(t.TempDir(), "synth.pickle")
				res, err := GenerateFile(out, src, Options{Entries: n, MaxAnnotatedReps: 2})
				if err != nil {
					t.Fatal(err)
				}
				py := pyLoad(t, out)
				if py.N != n || res.Entries != n {
					t.Fatalf("n=%d: python counts %d, generator %d", n, py.N, res.Entries)
				}
				gv := goLoad(t, out)
				sameEntries(t, "first 100", gv.head, py.Head)
				sameEntries(t, "last 100", gv.tail, py.Tail)
				if n >= sv.n {
					sameEntries(t, "last 100 vs source", gv.tail[len(gv.tail)-50:], sv.tail[len(sv.tail)-50:])
				}
				for _, a := range []string{"oom", "snapshot", "segment_alloc", "segment_free"} {
					if res.Actions[a] > sv.actions[a] {
						t.Errorf("n=%d: %d %s, source %d", n, res.Actions[a], a, sv.actions[a])
					}
				}
				r, err := analyze.Run(out, analyze.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Events != n || len(r.OOMs) != int(res.Actions["oom"]) {
					t.Errorf("n=%d: analyser: %d events, %d OOMs", n, r.Events, len(r.OOMs))
				}
			}
		})
	}
}

// A hand-made trace with pre-trace frees, a segment event, a block alive at
// the end, a pending free, an oom and a snapshot, cut at every length: the
// replay stays consistent and the end state is the source's.
func TestPlanReplay(t *testing.T) {
	const a = 0x7f0000000000
	src := []event{
		{act: profiler.ActFreeRequested, addr: a + 0x100, size: 64},
		{act: profiler.ActFreeCompleted, addr: a + 0x100, size: 64},
		{act: profiler.ActSegmentAlloc, addr: a, size: 1 << 20},
		{act: profiler.ActAlloc, addr: a + 0x1000, size: 512},
		{act: profiler.ActAlloc, addr: a + 0x2000, size: 512},
		{act: profiler.ActFreeRequested, addr: a + 0x1000, size: 512},
		{act: profiler.ActFreeCompleted, addr: a + 0x1000, size: 512},
		{act: profiler.ActAlloc, addr: a + 0x3000, size: 1024},
		{act: profiler.ActAlloc, addr: a + 0x4000, size: 2048},
		{act: profiler.ActFreeRequested, addr: a + 0x4000, size: 2048},
		{act: profiler.ActOOM, devFree: 5, size: 1 << 30},
		{act: profiler.ActFreeRequested, addr: a + 0x2000, size: 512},
		{act: profiler.ActFreeCompleted, addr: a + 0x2000, size: 512},
		{act: profiler.ActSnapshot},
	}
	for i := range src {
		src[i].time = 1_000_000 + int64(i)*10
	}
	segs := []profiler.Segment{{Addr: a, TotalSize: 1 << 20}}
	for n := int64(0); n <= 60; n++ {
		p, err := makePlan(append([]event(nil), src...), segs, n)
		if err != nil {
			t.Fatal(err)
		}
		var out []event
		p.each(func(e *event, as uint64, ts int64) {
			x := *e
			if x.act != profiler.ActOOM {
				x.addr += as
			}
			x.time += ts
			out = append(out, x)
		})
		if int64(len(out)) != n {
			t.Fatalf("n=%d: %d entries", n, len(out))
		}
		live := map[uint64]bool{}
		var last int64 = -1 << 62
		var once [16]int
		for i, e := range out {
			if e.time < last {
				t.Fatalf("n=%d: entry %d goes back in time", n, i)
			}
			last = e.time
			once[e.act]++
			switch e.act {
			case profiler.ActAlloc:
				if live[e.addr] {
					t.Fatalf("n=%d: entry %d allocates live %#x", n, i, e.addr)
				}
				live[e.addr] = true
			case profiler.ActFreeCompleted:
				if !live[e.addr] && e.time >= src[0].time-int64(p.reps-2)*p.timeStride && p.reps > 1 {
					t.Fatalf("n=%d: entry %d frees %#x, never allocated, after repetition 0", n, i, e.addr)
				}
				delete(live, e.addr)
			}
			if len(live) > 3 {
				t.Fatalf("n=%d: %d blocks live at entry %d", n, len(live), i)
			}
		}
		for _, act := range []profiler.Action{profiler.ActOOM, profiler.ActSnapshot, profiler.ActSegmentAlloc} {
			if once[act] > 1 {
				t.Errorf("n=%d: %d %v", n, once[act], act)
			}
		}
		// At the end: the blocks the source leaves alive, at their own addresses.
		if n >= int64(len(src)) {
			want := map[uint64]bool{a + 0x3000: true, a + 0x4000: true}
			if !reflect.DeepEqual(live, want) {
				t.Errorf("n=%d: live at the end %v", n, live)
			}
			tail := out[len(out)-len(p.last):]
			for i, j := range p.last {
				if tail[i].addr != src[j].addr && src[j].act != profiler.ActOOM || tail[i].time != src[j].time {
					t.Fatalf("n=%d: last repetition entry %d is %+v, source %+v", n, i, tail[i], src[j])
				}
			}
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	src := filepath.Join(fixtures, "gpt2_train.pickle")
	const n = 2_000_000
	for i := 0; i < b.N; i++ {
		res, err := Generate(io.Discard, src, Options{Entries: n})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(res.Bytes)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
