package torchsnap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/vsmtest"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/marshal"
)

// vsmPairs has Python write every snapshot the package's tests read (and the
// findings examples) as VSM1; it returns pickle, VSM pairs.
func vsmPairs(t *testing.T) [][2]string {
	t.Helper()
	findings, _ := filepath.Glob(filepath.Join(exampleDir, "findings", "*.pickle"))
	pickles := append(snapshotFiles(t), findings...)
	var pairs [][2]string
	for i, v := range vsmtest.Write(t, filepath.Join("..", "..", "jupyter"), t.TempDir(), pickles, 1000) {
		pairs = append(pairs, [2]string{pickles[i], v})
	}
	return pairs
}

// summary is everything a read produced, with stacks spelled out, and the
// stack table in ID order: both formats intern in the same order, so an
// analysis breaks ties alike. (Not quite for a stack of over 1000 frames: the
// pickle path also interns its first 1000, a batch of CPython's pickler.)
func summary(d decoded) string {
	var b strings.Builder
	for id := range d.fr.NumStacks() {
		if len(d.fr.StackAt(profiler.StackID(id))) > 1000 {
			b.Reset()
			break
		}
		fmt.Fprintf(&b, "stack %d %q\n", id, stackKey(d.fr, profiler.StackID(id)))
	}
	s := d.snap
	fmt.Fprintf(&b, "settings %v\nannotations %v\ntraces %v %v legacy %v\n", s.Settings, s.Annotations, s.TraceDevices, s.TraceEvents, s.Legacy)
	for _, seg := range s.Segments {
		blocks := seg.Blocks
		seg.Blocks = nil
		fmt.Fprintf(&b, "segment %+v\n", seg)
		for _, bl := range blocks {
			stack := stackKey(d.fr, bl.Stack)
			bl.Stack = 0
			fmt.Fprintf(&b, "  block %+v %q\n", bl, stack)
		}
	}
	for trace := range s.TraceEvents {
		fmt.Fprintf(&b, "trace %d: %d events, digest %s\n", trace, len(d.col.traces[trace].events), d.col.digest(trace))
	}
	return b.String()
}

// TestVSMMatchesPickle: a snapshot read from its VSM1 version gives the same
// Snapshot and streams the same events, in the same order, as its pickle;
// also through ReadVSM from a pipe that delivers a few bytes at a time.
func TestVSMMatchesPickle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3 on every snapshot")
	}
	n := 0
	for _, pair := range vsmPairs(t) {
		if _, err := os.Stat(pair[1]); err != nil {
			continue // not a dict snapshot
		}
		n++
		want := summary(readAll(t, pair[0]))
		if got := summary(readAll(t, pair[1])); got != want {
			t.Errorf("%s: the VSM1 version reads differently:\n%s", pair[0], firstDiff(got, want))
		}
		if n%4 == 0 { // a slow stream is slow: a sample of them
			if got := summary(readPiped(t, pair[1])); got != want {
				t.Errorf("%s: ReadVSM from a pipe reads differently:\n%s", pair[0], firstDiff(got, want))
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d snapshots compared", n)
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got %.300s\nwant %.300s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}

// readPiped reads a VSM1 file through ReadVSM from a pipe written 4 KiB at a
// time, as the agent's stream arrives.
func readPiped(t *testing.T, path string) decoded {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		for len(b) > 0 {
			n := min(len(b), 4096)
			if _, err := pw.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
		pw.Close()
	}()
	fr := profiler.NewFrames()
	col := newCollector(fr)
	snap, err := ReadVSM(pr, fr, col.onEvent, Options{})
	pr.Close()
	if err != nil {
		t.Fatal(err)
	}
	return decoded{snap, fr, col}
}

// TestVSMErrors: the reader's answers for files that are not whole VSM1
// snapshots name the file and what is wrong.
func TestVSMErrors(t *testing.T) {
	small, err := os.ReadFile(filepath.Join("..", "marshal", "testdata", "small.vsm"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"text", []byte("hello"), "neither a snapshot pickle nor a VSM1 stream"},
		{"VSM9", []byte("VSM9...."), `unsupported VSM version "VSM9"`},
		{"truncated", small[:len(small)-9], "truncated: it ends without its end frame 'Z'"},
		{"cut in a chunk", small[:800], "truncated inside a 'C' frame"},
		{"trailing bytes", append(append([]byte{}, small...), "junk"...), "4 bytes after the VSM1 end frame"},
		{"entries that are not dicts", vsmOf("H", "{\xda\x08segments[\x00\x00\x00\x000", "D", "", "C", "[\x01\x00\x00\x00N", "Z", ""),
			"device_traces[0] holds Nones, not trace entries"},
		{"an entry with no action", vsmOf("H", "{0", "D", "", "C", "[\x02\x00\x00\x00{z\x06actionz\x05alloc0{0", "Z", ""),
			`device trace 0, entry 1: no "action" string`},
		{"segments not a list", vsmOf("H", "{z\x08segmentsi\x01\x00\x00\x000", "Z", ""), `"segments" is a int, not a list`},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name+".vsm")
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path, profiler.NewFrames(), nil, Options{})
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("%s: %v, want %q", c.name, err, c.msg)
		}
	}
	// A snapshot with no device traces: "segments" alone.
	s, err := Decode(vsmOf("H", "{\xda\x08segments[\x00\x00\x00\x000", "Z", ""), profiler.NewFrames(), nil)
	if err != nil || len(s.TraceEvents) != 0 {
		t.Errorf("no traces: %v, %v", s, err)
	}
}

// vsmOf builds a VSM1 stream from kind/payload pairs.
func vsmOf(frames ...string) []byte {
	b := []byte("VSM1")
	for i := 0; i+1 < len(frames); i += 2 {
		n := uint64(len(frames[i+1]))
		b = append(b, frames[i][0], byte(n), byte(n>>8), byte(n>>16), byte(n>>24), 0, 0, 0, 0)
		b = append(b, frames[i+1]...)
	}
	return b
}

// FuzzReadVSM: reading a VSM1 stream never panics (nor hangs), and reading
// the same bytes twice streams the same events and returns the same snapshot.
func FuzzReadVSM(f *testing.F) {
	small, err := os.ReadFile(filepath.Join("..", "marshal", "testdata", "small.vsm"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add(vsmOf("H", "{0", "D", "", "C", "[\x02\x00\x00\x00{z\x06actionz\x05alloc0{0", "Z", ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 || string(b[:4]) != "VSM1" {
			b = append([]byte("VSM1"), b...)
		}
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("reading %q took over 10s", b)) })
		defer watchdog.Stop()
		first, s1, err1 := fuzzDecode(t, b)
		second, s2, err2 := fuzzDecode(t, b)
		if (err1 == nil) != (err2 == nil) || first != second {
			t.Fatalf("two reads disagree: %v / %v", err1, err2)
		}
		if err1 == nil && fmt.Sprint(s1.Segments, s1.TraceDevices, s1.TraceEvents) != fmt.Sprint(s2.Segments, s2.TraceDevices, s2.TraceEvents) {
			t.Fatal("two reads returned different snapshots")
		}
	})
}

// TestVSMStreamsWhileWritten: events arrive before the stream is complete.
func TestVSMStreamsWhileWritten(t *testing.T) {
	small, err := os.ReadFile(filepath.Join("..", "marshal", "testdata", "small.vsm"))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	firstEvent := make(chan struct{})
	go func() {
		pw.Write(small[:1400]) // the header and two chunks of device 0
		<-firstEvent           // only once an event came out does the rest follow
		pw.Write(small[1400:])
		pw.Close()
	}()
	n := 0
	_, err = ReadVSM(pr, profiler.NewFrames(), func(int, *profiler.Event) error {
		if n++; n == 1 {
			close(firstEvent)
		}
		return nil
	}, Options{})
	if err != nil || n != 8 {
		t.Fatalf("%d events, %v", n, err)
	}
}

// TestVSMStopsCleanly: an error in a chunk, or from onEvent, comes after the
// events before it, even with later chunks decoded ahead; the first error in
// the stream is the one returned; and once ReadVSM returns, nothing reads the
// stream any more and none of its goroutines is left.
func TestVSMStopsCleanly(t *testing.T) {
	good := "{z\x06actionz\x05alloc0"
	chunk := func(entries ...string) string {
		n := len(entries)
		return "[" + string([]byte{byte(n), 0, 0, 0}) + strings.Join(entries, "")
	}
	frames := []string{"H", "{0", "D", ""}
	for range 5 {
		frames = append(frames, "C", chunk(good, good, good))
	}
	frames = append(frames, "C", chunk(good, "{z\x06actionN0", good))
	for range 5 {
		frames = append(frames, "C", chunk(good, good, good))
	}
	frames = append(frames, "C", chunk("N"), "Z", "")
	b := vsmOf(frames...)
	stop := errors.New("stop")
	for _, c := range []struct {
		stopAt int // onEvent fails at this event (0: never)
		events int
		msg    string
	}{
		{0, 16, `device trace 0, entry 16: "action" is a None`},
		{7, 7, "stop"},
	} {
		before := runtime.NumGoroutine()
		src := &watchedReader{r: bytes.NewReader(b)}
		n := 0
		_, err := ReadVSM(src, profiler.NewFrames(), func(int, *profiler.Event) error {
			if n++; n == c.stopAt {
				return stop
			}
			return nil
		}, Options{})
		src.returned.Store(true)
		if err == nil || !strings.Contains(err.Error(), c.msg) || n != c.events || (c.stopAt > 0 && !errors.Is(err, stop)) {
			t.Errorf("stop at %d: %d events, %v; want %d, %q", c.stopAt, n, err, c.events, c.msg)
		}
		time.Sleep(20 * time.Millisecond)
		if src.late.Load() {
			t.Errorf("stop at %d: the stream was read after ReadVSM returned", c.stopAt)
		}
		for i := 0; runtime.NumGoroutine() > before; i++ {
			if i == 100 {
				t.Fatalf("stop at %d: %d goroutines left running", c.stopAt, runtime.NumGoroutine()-before)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// watchedReader is a slow stream (64 bytes a millisecond) that notes a read
// going on after returned is set.
type watchedReader struct {
	r        io.Reader
	returned atomic.Bool
	late     atomic.Bool
}

func (w *watchedReader) Read(b []byte) (int, error) {
	if w.returned.Load() {
		w.late.Store(true)
	}
	time.Sleep(time.Millisecond)
	n, err := w.r.Read(b[:min(len(b), 64)])
	if w.returned.Load() {
		w.late.Store(true)
	}
	return n, err
}

// FuzzVSMAsPickle: a VSM1 stream read directly gives the events, stacks
// (those the events use, in the order of their IDs) and snapshot that its
// pickle (marshal.Transcode) gives, whenever both read. (The pickle path also
// interns frames lists that no event uses, such as one under a trace entry's
// key other than "frames"; the VSM1 path does not.)
func FuzzVSMAsPickle(f *testing.F) {
	small, err := os.ReadFile(filepath.Join("..", "marshal", "testdata", "small.vsm"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add(vsmOf("H", "{\xda\x08segments[\x00\x00\x00\x000", "D", "", "D", "",
		"C", "[\x02\x00\x00\x00\xfb\xda\x06action\xda\x05alloc\xda\x06frames\xdb\x01\x00\x00\x00\xfb\xda\x08filenamez\x01a\xda\x04linei\x01\x00\x00\x000"+
			"0{r\x01\x00\x00\x00r\x02\x00\x00\x00r\x03\x00\x00\x00r\x04\x00\x00\x000", "Z", ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 || string(b[:4]) != "VSM1" {
			b = append([]byte("VSM1"), b...)
		}
		var pk bytes.Buffer
		if marshal.Transcode(bytes.NewReader(b), &pk) != nil {
			return
		}
		direct, err1 := fuzzRead(b)
		viaPickle, err2 := fuzzRead(pk.Bytes())
		if err1 == nil && err2 == nil && direct != viaPickle {
			t.Fatalf("read directly:\n%s\nread as its pickle:\n%s", direct, viaPickle)
		}
	})
}

// fuzzRead is everything Decode finds in b, spelled out.
func fuzzRead(b []byte) (string, error) {
	fr := profiler.NewFrames()
	var out strings.Builder
	n := 0
	used := map[profiler.StackID]bool{}
	s, err := Decode(b, fr, func(trace int, e *profiler.Event) error {
		if n++; n > 1<<16 {
			return errors.New("too many events")
		}
		fmt.Fprintf(&out, "%d %d %s", trace, e.Seq, eventLine(fr, e))
		used[e.Stack] = true
		return nil
	})
	if err != nil {
		return "", err
	}
	for id := range fr.NumStacks() {
		if used[profiler.StackID(id)] {
			fmt.Fprintf(&out, "stack %q\n", stackKey(fr, profiler.StackID(id)))
		}
	}
	fmt.Fprintf(&out, "%v %v %v %v %v %v\n", s.Segments, s.Annotations, s.Settings, s.TraceDevices, s.TraceEvents, s.Legacy)
	return out.String(), nil
}
