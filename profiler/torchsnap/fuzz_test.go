package torchsnap

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler"
)

// FuzzSnapshot: Decode never panics (nor hangs), and decoding the same bytes
// twice streams the same events and returns the same snapshot. (A key that
// contains itself overflows the stack, which no recover can catch; that case
// is TestHostileKeys', run in a child process, and is not seeded here.)
func FuzzSnapshot(f *testing.F) {
	for _, p := range []string{
		filepath.Join(exampleDir, "cuda_graph.pickle"),
		filepath.Join(variantDir, "legacy_history.pickle"),
		filepath.Join(variantDir, "first_trace_empty.pickle"),
		filepath.Join(variantDir, "bare_segments.pickle"),
		filepath.Join(variantDir, "traces_only.pickle"),
		filepath.Join(variantDir, "shared_entry_p2.pickle"),
		filepath.Join(variantDir, "shared_entry_p4.pickle"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	entry := dict{{"action", "oom"}, {"device_free", 10}, {"size", 20}, {"stream", nil}, {"time_us", 1},
		{"frames", []any{dict{{"filename", "a.py"}, {"line", 3}, {"name", "f"}}}}}
	for _, b := range [][]byte{
		pkl(dict{{"segments", []any{}}, {"device_traces", []any{[]any{entry, entry}, []any{}}}}),
		pkl(dict{{"segments", []any{dict{{"address", 4096}, {"total_size", 1024}, {"blocks", []any{
			dict{{"size", 512}, {"state", "active_allocated"}, {"history", []any{dict{{"addr", 4096}, {"real_size", 500}}}}},
			dict{{"size", 512}, {"state", "inactive"}}}}}}}}),
		pkl(dict{{"device_traces", []any{raw("(l")}}}),
		pkl(dict{{"a", 1}}),
		[]byte("\x80\x02}N" + "2\x862\x862\x86" + "Ns."),
		hostile.DeepStack(profiler.MaxStackDepth + 10), // a stack cut in the middle
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("decoding %q took over 10s", b)) })
		defer watchdog.Stop()
		first, s1, err1 := fuzzDecode(t, b)
		second, s2, err2 := fuzzDecode(t, b)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("two decodes disagree: %v / %v", err1, err2)
		}
		if first != second {
			t.Fatal("two decodes streamed different events")
		}
		if err1 == nil && fmt.Sprint(s1.Segments, s1.TraceDevices, s1.TraceEvents, s1.Annotations, s1.Legacy) !=
			fmt.Sprint(s2.Segments, s2.TraceDevices, s2.TraceEvents, s2.Annotations, s2.Legacy) {
			t.Fatal("two decodes returned different snapshots")
		}
		if err1 == nil && len(s1.TraceDevices) != len(s1.TraceEvents) {
			t.Fatalf("TraceDevices %v but TraceEvents %v", s1.TraceDevices, s1.TraceEvents)
		}
	})
}

// fuzzDecode decodes b and summarises the streamed events. A panic fails the
// test (plain go test would otherwise stop at the first panicking seed).
func fuzzDecode(t *testing.T, b []byte) (_ string, _ *Snapshot, err error) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Decode panicked: %v", r)
		}
	}()
	fr := profiler.NewFrames()
	n := 0
	var sum uint64
	s, err := Decode(b, fr, func(trace int, e *profiler.Event) error {
		if n++; n > 1<<20 {
			return fmt.Errorf("too many events")
		}
		sum = sum*31 + uint64(trace) + uint64(e.Action)*7 + e.Addr*3 + e.Size + uint64(len(fr.StackAt(e.Stack)))
		return nil
	})
	return fmt.Sprint(n, sum), s, err
}
