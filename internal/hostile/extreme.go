package hostile

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// Entry is one trace entry of a hand-made snapshot: the fields whose
// extreme values broke the analyses' arithmetic.
type Entry struct {
	Action string // "alloc", "free_completed", "segment_alloc", "oom", ...
	Addr   uint64
	Size   uint64
	TimeUS int64
}

// Trace is a snapshot of one device trace holding entries, each with the
// same user frame, as Python pickles it:
//
//	pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc',
//	    'addr': 0, 'size': 512, 'stream': 0, 'time_us': -2**63,
//	    'frames': [{'name': 'f', 'filename': 'train.py', 'line': 7}]}, ...]]}, 4)
func Trace(entries []Entry) []byte { return Named(entries, "train.py", "f") }

// Named is Trace with the frame's file and function names given: terminal
// escape sequences in them reached the user's terminal through the CLI's
// text outputs.
func Named(entries []Entry, file, function string) []byte {
	return traces(func(w *pickle.Writer) {
		for _, e := range entries {
			entry(w, e, file, function, 7)
		}
	}, nil)
}

// traces pickles {'segments': [], 'device_traces': [[...]], ...}: each
// writes the trace's entries, extra (if any) more keys.
func traces(each, extra func(w *pickle.Writer)) []byte {
	var b []byte
	w := pickle.NewWriter(sliceWriter{&b})
	w.BeginDict()
	w.Key("segments")
	w.BeginList()
	w.EndList()
	w.Key("device_traces")
	w.BeginList()
	w.BeginList()
	if each != nil {
		each(w)
	}
	w.EndList()
	w.EndList()
	if extra != nil {
		extra(w)
	}
	w.EndDict()
	if err := w.Close(); err != nil {
		panic(err) // writing to a slice does not fail
	}
	return b
}

// entry writes one trace entry with a frame of file, function and line.
func entry(w *pickle.Writer, e Entry, file, function string, line int) {
	w.BeginDict()
	w.Key("action")
	w.Str(e.Action)
	w.Key("addr")
	w.Uint(e.Addr)
	w.Key("size")
	w.Uint(e.Size)
	w.Key("stream")
	w.Int(0)
	w.Key("time_us")
	w.Int(e.TimeUS)
	w.Key("frames")
	w.BeginList()
	w.BeginDict()
	w.Key("name")
	w.Str(function)
	w.Key("filename")
	w.Str(file)
	w.Key("line")
	w.Int(int64(line))
	w.EndDict()
	w.EndList()
	w.EndDict()
}

// ExtremeTimes is the file of round 2's High defect: two allocations at
// time_us -2^63 and 2^62. Their difference overflowed int64, the timeline's
// bucket index went negative and the panic killed the CLI, the daemon and
// the language server.
func ExtremeTimes() []byte {
	return Trace([]Entry{{"alloc", 0, 512, math.MinInt64}, {"alloc", 1024, 512, 1 << 62}})
}

// Extremes are the extreme-integer snapshots by name: times, sizes and
// addresses at the ends of their ranges. Every layer must answer each with
// an error naming the file and the field, never a panic.
func Extremes() map[string][]byte {
	return map[string][]byte{
		"times":         ExtremeTimes(),
		"time-max":      Trace([]Entry{{"alloc", 0, 512, 0}, {"alloc", 1024, 512, math.MaxInt64}}),
		"size-max":      Trace([]Entry{{"alloc", 0, math.MaxUint64, 1}, {"alloc", 1 << 40, math.MaxUint64, 2}}),
		"address-wraps": Trace([]Entry{{"alloc", math.MaxUint64 - 511, 1024, 1}}),
		"segment-max":   Trace([]Entry{{"segment_alloc", 0, 1 << 63, 1}, {"segment_alloc", 1 << 63, 1 << 63, 2}}),
	}
}

// Write writes b to a file called name in a test's temporary directory and
// returns its path.
func Write(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// NaNDuration is a snapshot whose tensor walk says it took NaN ms (json
// cannot carry NaN: the daemon's analysis.summary answered with error code
// 0 and analysis.report with -32603).
func NaNDuration() []byte {
	return traces(nil, func(w *pickle.Writer) {
		w.Key("vramscope_tensors")
		w.BeginDict()
		w.Key("version")
		w.Int(1)
		w.Key("took_ms")
		w.Float(math.NaN())
		w.Key("entries")
		w.BeginList()
		w.EndList()
		w.EndDict()
	})
}

// ManyLines is a snapshot of n allocations, each from a line of its own
// (a.py:1 to a.py:n), each freed after the next: 300,000 of them (42 MB)
// made a 111 MB summary, and their analysis holds 210 MB.
func ManyLines(n int) []byte {
	return traces(func(w *pickle.Writer) {
		for i := 0; i < n; i++ {
			entry(w, Entry{"alloc", uint64(i%2) * 4096, 4096, int64(2 * i)}, "a.py", "f", i+1)
			if i > 0 {
				entry(w, Entry{"free_completed", uint64((i-1)%2) * 4096, 4096, int64(2*i + 1)}, "a.py", "f", i)
			}
		}
	}, nil)
}
