package torchsnap

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// A tiny pickle writer for hand-made inputs (protocol 2, no memo).
type (
	kv    struct{ k, v any }
	dict  []kv
	tuple []any
	raw   string // opcodes spliced in as they are
)

func pkl(v any) []byte { return append(append([]byte("\x80\x02"), enc(nil, v)...), '.') }

func enc(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, 'N')
	case bool:
		if x {
			return append(b, 0x88)
		}
		return append(b, 0x89)
	case int:
		if int64(x) == int64(int32(x)) {
			return binary.LittleEndian.AppendUint32(append(b, 'J'), uint32(int32(x)))
		}
		return binary.LittleEndian.AppendUint64(append(b, 0x8a, 8), uint64(x))
	case string:
		b = binary.LittleEndian.AppendUint32(append(b, 'X'), uint32(len(x)))
		return append(b, x...)
	case raw:
		return append(b, x...)
	case tuple:
		b = append(b, '(')
		for _, it := range x {
			b = enc(b, it)
		}
		return append(b, 't')
	case []any:
		b = append(b, ']')
		if len(x) == 0 {
			return b
		}
		b = append(b, '(')
		for _, it := range x {
			b = enc(b, it)
		}
		return append(b, 'e')
	case dict:
		b = append(b, '}')
		if len(x) == 0 {
			return b
		}
		b = append(b, '(')
		for _, it := range x {
			b = enc(enc(b, it.k), it.v)
		}
		return append(b, 'u')
	}
	panic("pkl: unsupported type")
}

// decodeSafe runs Decode and turns a panic into a test failure.
func decodeSafe(t *testing.T, b []byte) (s *Snapshot, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 8<<10)
			buf = buf[:runtime.Stack(buf, false)]
			t.Fatalf("Decode panicked on %q: %v\n%s", b[:min(len(b), 48)], r, firstLines(string(buf), 9))
		}
	}()
	return Decode(b, profiler.NewFrames(), func(int, *profiler.Event) error { return nil })
}

// TestTruncatedSnapshot cuts a real snapshot at every byte offset: Decode
// must fail, never panic, with a truncation error inside the cut input.
func TestTruncatedSnapshot(t *testing.T) {
	t.Parallel()
	defer debug.SetGCPercent(debug.SetGCPercent(2000)) // every decode allocates 1 MiB buffers
	full, err := os.ReadFile(filepath.Join(exampleDir, "cuda_graph.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut < len(full); cut++ {
		_, err := decodeSafe(t, full[:cut])
		if err == nil {
			t.Fatalf("cut at %d decoded without error", cut)
		}
		if cut == 0 {
			if !strings.Contains(err.Error(), "empty") {
				t.Fatalf("empty input: %v", err)
			}
			continue
		}
		var pe *pickle.Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "truncated") || pe.Offset > int64(cut) || pe.Offset < 0 {
			t.Fatalf("cut at %d: %v, want a truncation at or before %d", cut, err, cut)
		}
	}
	// Through files too: the error names the file.
	dir := t.TempDir()
	for _, cut := range []int{1, 2, 100, len(full) / 2, len(full) - 1} {
		path := filepath.Join(dir, "cut.pickle")
		if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path, profiler.NewFrames(), nil, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("ReadFile of a %d-byte cut: %v", cut, err)
		}
	}
}

// TestNotSnapshots feeds inputs that are not snapshots, or are broken ones:
// each must give an error that names the problem, never a panic.
func TestNotSnapshots(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	random := make([]byte, 2048)
	rng.Read(random)
	entry := func(extra ...kv) dict {
		return append(dict{{"action", "alloc"}, {"addr", 4096}, {"size", 512}}, extra...)
	}
	cases := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"empty", nil, "empty file"},
		{"random", random, "not a pickle"},
		{"JSON", []byte(`{"segments": [], "device_traces": []}`), "JSON"},
		{"xz", []byte("\xfd7zXZ\x00\x00\x04"), "compressed"},
		{"gzip", []byte("\x1f\x8b\x08\x00\x00\x00"), "compressed"},
		{"bzip2", []byte("BZh91AY&SY"), "compressed"},
		{"zstd", []byte("\x28\xb5\x2f\xfd\x04\x58"), "compressed"},
		{"plain dict", pkl(dict{{"a", 1}, {"weights", []any{1, 2}}}), `not a PyTorch memory snapshot: the top-level dict has no "segments" or "device_traces" (keys: ["a" "weights"])`},
		{"empty dict", pkl(dict{}), "not a PyTorch memory snapshot"},
		{"str", pkl("hello"), "not a PyTorch memory snapshot: the pickle holds a str"},
		{"int", pkl(5), "not a PyTorch memory snapshot: the pickle holds a int"},
		{"None", pkl(nil), "not a PyTorch memory snapshot"},
		{"tuple", pkl(tuple{1, 2}), "not a PyTorch memory snapshot"},
		{"segments not a list", pkl(dict{{"segments", 5}}), `"segments" is a int, not a list`},
		{"segment not a dict", pkl(dict{{"segments", []any{5}}}), "segment 0: a int, not a dict"},
		{"block not a dict", pkl(dict{{"segments", []any{dict{{"blocks", []any{"x"}}}}}}), "segment 0: block 0: a str, not a dict"},
		{"bare list of ints", pkl([]any{1, 2}), "segment 0: a int, not a dict"},
		{"device_traces not a list", pkl(dict{{"device_traces", 5}}), `"device_traces" is a int, not a list`},
		{"device trace not a list", pkl(dict{{"device_traces", []any{5}}}), "device_traces[0] is a int, not a list"},
		{"device trace of ints", pkl(dict{{"device_traces", []any{[]any{1, 2}}}}), "device_traces[0] holds ints, not trace entries"},
		{"entry without action", pkl(dict{{"device_traces", []any{[]any{entry(), dict{{"addr", 1}}}}}}), `device trace 0, entry 1: no "action" string`},
		{"entry not a dict", pkl(dict{{"device_traces", []any{[]any{entry(), 5}}}}), "device trace 0: entry 1 is a int, not a dict"},
		{"addr a string", pkl(dict{{"device_traces", []any{[]any{entry(kv{"addr", "x"})}}}}), `"addr" must be a number, not a str`},
		{"negative size", pkl(dict{{"device_traces", []any{[]any{entry(kv{"size", -1})}}}}), `"size" is -1: it must not be negative`},
		{"frames not a list", pkl(dict{{"device_traces", []any{[]any{entry(kv{"frames", 5})}}}}), "frames is a int, not a list"},
		{"frame not a dict", pkl(dict{{"device_traces", []any{[]any{entry(kv{"frames", []any{5}})}}}}), "a frame is a int, not a dict"},
		{"block frame not a dict", pkl(dict{{"segments", []any{dict{{"blocks", []any{dict{{"frames", []any{"f"}}}}}}}}}), "a frame is a str, not a dict"},
		{"refused opcode", pkl(dict{{"segments", raw("cos\nsystem\n")}}), "refusing opcode GLOBAL"},
		{"protocol 0", []byte("(dp0\nS'segments'\np1\n(lp2\nss."), "no PROTO opcode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeSafe(t, c.in)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want one containing %q", err, c.msg)
			}
		})
	}
}

// TestEmptyBatches feeds lists built from an empty MARK: "(l" (LIST with no
// items) and "](e" (an APPENDS with an empty batch). CPython accepts both;
// the decoder must not index the empty batch.
func TestEmptyBatches(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
	}{
		{"(l at top", []byte("\x80\x02(l.")},
		{"](e at top", []byte("\x80\x02](e.")},
		{"empty device trace as (l", pkl(dict{{"segments", []any{}}, {"device_traces", []any{raw("(l")}}})},
		{"empty frames as ](e", pkl(dict{{"device_traces", []any{[]any{dict{{"action", "alloc"}, {"frames", raw("](e")}}}}}})},
		{"trace with an empty batch first", pkl(dict{{"device_traces", []any{raw("](e(}(X\x06\x00\x00\x00actionX\x05\x00\x00\x00allocue")}}})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decodeSafe(t, c.in); err != nil && !strings.Contains(err.Error(), "not a PyTorch memory snapshot") && !strings.Contains(err.Error(), "segment") {
				t.Fatalf("unexpected error: %v", err)
			}
		})
	}
}

// TestHostileKeys: the "not a snapshot" message lists the top-level keys. A
// key may be any hashable value, such as a tuple that names the same tuple
// twice, 20 levels deep: 41 bytes of pickle whose full expansion has a
// million leaves. Listing keys must not expand it.
func TestHostileKeys(t *testing.T) {
	if path := os.Getenv("VRAMSCOPE_HOSTILE_CHILD"); path != "" {
		// Child process of the cycle case below.
		debug.SetMaxStack(16 << 20)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(b, profiler.NewFrames(), nil)
		os.Stdout.WriteString("CHILD-RESULT: " + errString(err) + "\n")
		return
	}

	in := "\x80\x02}N" + strings.Repeat("2\x86", 20) + "Ns." // {t20: None}, t(k+1) = (t(k), t(k))
	start := time.Now()
	_, err := decodeSafe(t, []byte(in))
	if err == nil || !strings.Contains(err.Error(), "not a PyTorch memory snapshot") {
		t.Fatalf("error %v", err)
	}
	if n := len(err.Error()); n > 4096 {
		t.Errorf("a %d-byte pickle gave a %d-byte error message in %v: the key was expanded", len(in), n, time.Since(start))
	}

	// A tuple key holding a list that holds itself: the key listing must not
	// recurse forever. This runs in a child process, since a stack overflow
	// kills the whole process.
	cyc := pkl(dict{{raw("]q\x00h\x00a\x85"), nil}}) // {([...],): None}, the list containing itself
	path := filepath.Join(t.TempDir(), "cycle.pickle")
	if err := os.WriteFile(path, cyc, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHostileKeys$", "-test.count=1")
	cmd.Env = append(os.Environ(), "VRAMSCOPE_HOSTILE_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CHILD-RESULT: ") || !strings.Contains(string(out), "not a PyTorch memory snapshot") {
		t.Fatalf("decoding a self-containing key: %v\n%s", err, firstLines(string(out), 12))
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// TestReadFileErrors checks the errors of the file reader name the file and
// the problem.
func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		path string
		msg  string
	}{
		{filepath.Join(dir, "missing.pickle"), "no such file"},
		{dir, "not a regular file"},
		{write("empty.pickle", nil), "empty file"},
		{write("snap.pickle.gz", []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00")), "compressed"},
		{write("snap.json", []byte(`{"segments": []}`)), "JSON"},
		{write("plain.pickle", pkl(dict{{"a", 1}})), "not a PyTorch memory snapshot"},
	}
	for _, c := range cases {
		_, err := ReadFile(c.path, profiler.NewFrames(), nil, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), c.path+": ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ReadFile(%s) = %v, want %q prefixed by the path", filepath.Base(c.path), err, c.msg)
		}
	}
	// An event callback's error stops the read and comes back.
	stop := errors.New("enough")
	n := 0
	_, err := ReadFile(filepath.Join(exampleDir, "leak_steps.pickle"), profiler.NewFrames(), func(int, *profiler.Event) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	}, Options{})
	if !errors.Is(err, stop) && (err == nil || !strings.Contains(err.Error(), "enough")) {
		t.Errorf("callback error came back as %v", err)
	}
	if n != 10 {
		t.Errorf("callback called %d times after failing at 10", n)
	}
}
