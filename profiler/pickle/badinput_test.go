package pickle

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"testing/iotest"
)

var smallSnapshot = filepath.Join(exampleDir, "cuda_graph.pickle")

// checkTruncated asserts err reports a truncation at or before the cut.
func checkTruncated(t *testing.T, err error, cut int, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: cut at %d decoded without error", what, cut)
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: cut at %d: error %v (%T) is not a *pickle.Error", what, cut, err, err)
	}
	if !strings.Contains(pe.Msg, "truncated") {
		t.Fatalf("%s: cut at %d: error %q does not say truncated", what, cut, err)
	}
	if pe.Offset < 0 || pe.Offset > int64(cut) {
		t.Fatalf("%s: cut at %d: error offset %d is past the end", what, cut, pe.Offset)
	}
}

func planOf(t *testing.T, b []byte) *Plan {
	t.Helper()
	plan, err := Scan(bytes.NewReader(b), int64(len(b)), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestTruncatedEverywhere cuts a real snapshot at every byte offset. Decode
// must fail with a truncation error (never panic) whose offset is within the
// cut input. The decoding pass is also run on its own, with the plan of the
// whole file, as happens when a file shrinks between ReadFile's two passes:
// at every fourth cut with the size known, every twelfth without it.
func TestTruncatedEverywhere(t *testing.T) {
	t.Parallel()
	// Every decode allocates a 1 MiB read buffer; collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(2000))
	full := readFile(t, smallSnapshot)
	for cut := 0; cut < len(full); cut++ {
		b := full[:cut]
		_, err := decodeNoPanic(t, b, DefaultLimits)
		checkTruncated(t, err, cut, "Decode")

		var sizes []int64
		if cut%4 == 0 {
			sizes = append(sizes, int64(cut))
		}
		if cut%12 == 0 {
			sizes = append(sizes, -1)
		}
		for _, size := range sizes {
			plan := planOf(t, full) // a Plan is used up by the Machine that follows it
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Machine panicked at cut %d (size %d): %v", cut, size, r)
					}
				}()
				_, err = NewMachine(bytes.NewReader(b), size, plan, DefaultLimits).Run()
			}()
			checkTruncated(t, err, cut, "Machine")
		}
	}
}

// TestTruncatedLargeString cuts inside strings longer than the reader's
// buffer, which are read around it.
func TestTruncatedLargeString(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	full := []byte("\x80\x04(\x8d" + u64(uint64(len(big))) + big + "B" + u32(uint32(len(big))) + big + "l.")
	for _, cut := range []int{3, 4, 11, 12, 13, 1 << 20, 1<<20 + 13, 3<<20 + 12, 3<<20 + 13, 3<<20 + 17, 3<<20 + 18, 5 << 20, len(full) - 2, len(full) - 1} {
		b := full[:cut]
		_, err := decodeNoPanic(t, b, DefaultLimits)
		checkTruncated(t, err, cut, "Decode")
		for _, size := range []int64{int64(cut), -1} {
			_, err = NewMachine(bytes.NewReader(b), size, planOf(t, full), DefaultLimits).Run()
			checkTruncated(t, err, cut, "Machine")
		}
	}
}

// TestReaderShapes decodes a real snapshot through readers that return one
// byte, or half of what is asked, at a time: the result must not depend on how
// the input arrives.
func TestReaderShapes(t *testing.T) {
	full := readFile(t, filepath.Join(exampleDir, "expandable.pickle"))
	v, err := Decode(full, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := digestOf(v)
	shapes := map[string]func(io.Reader) io.Reader{
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			plan, err := Scan(shape(bytes.NewReader(full)), int64(len(full)), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewMachine(shape(bytes.NewReader(full)), int64(len(full)), plan, DefaultLimits).Run()
			if err != nil {
				t.Fatal(err)
			}
			if got := digestOf(v); got != want {
				t.Fatalf("decoded value differs from Decode's")
			}
		})
	}
}

// TestReadError checks that a failing reader's error is reported as such, not
// as a truncated file.
func TestReadError(t *testing.T) {
	full := readFile(t, smallSnapshot)
	boom := errors.New("disk on fire")
	for _, at := range []int{0, 1, 100, len(full) / 2, len(full) - 1} {
		r := io.MultiReader(bytes.NewReader(full[:at]), iotest.ErrReader(boom))
		_, err := Scan(r, int64(len(full)), DefaultLimits)
		if err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("read error after %d bytes reported as %v", at, err)
		}
	}
}

// TestNotPickles feeds inputs that are not pickles at all.
func TestNotPickles(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 4096)
	rng.Read(random)
	cases := map[string][]byte{
		"empty":     {},
		"random":    random,
		"JSON":      []byte(`{"segments": [], "device_traces": [[]]}`),
		"JSON list": []byte(`[1, 2, 3]`),
		"xz":        []byte("\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4F"),
		"gzip":      []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"),
		"bzip2":     []byte("BZh91AY&SY"),
		"zstd":      []byte("\x28\xb5\x2f\xfd\x04\x58"),
		"zip":       []byte("PK\x03\x04\x14\x00\x00\x00"),
		"text":      []byte("hello world\n"),
		"proto 0":   []byte("(dp0\nS'a'\np1\nI1\ns."),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decodeNoPanic(t, b, DefaultLimits)
			if err == nil {
				t.Fatal("decoded without error")
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *pickle.Error", err)
			}
		})
	}
	sniff := []struct {
		name string
		head string
		msg  string
	}{
		{"empty", "", "empty file"},
		{"xz", "\xfd7zX", "compressed"},
		{"gzip", "\x1f\x8b\x08\x00", "compressed"},
		{"bzip2", "BZh9", "compressed"},
		{"zstd", "\x28\xb5\x2f\xfd", "compressed"},
		{"JSON object", "{\"se", "JSON"},
		{"JSON list", "[1, ", "JSON"},
		{"text", "hell", "no PROTO opcode"},
		{"protocol 0", "(dp0", "no PROTO opcode"},
	}
	for _, c := range sniff {
		if err := Sniff([]byte(c.head)); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Sniff(%s) = %v, want an error containing %q", c.name, err, c.msg)
		}
	}
	for _, ok := range []string{"\x80\x02", "\x80\x04\x95\x00", "\x80\x05"} {
		if err := Sniff([]byte(ok)); err != nil {
			t.Errorf("Sniff(%q) = %v, want nil", ok, err)
		}
	}
}

const memBound = 256 << 20

// TestAbsurdSizes feeds pickles whose length fields, memo indices, nesting or
// stack would make a naive decoder allocate without bound. Each must fail (or,
// where the pickle is valid, decode) while the heap grows by less than 256 MiB.
func TestAbsurdSizes(t *testing.T) {
	huge := Limits{MaxStack: 1 << 20, MaxMarks: 1 << 12, MaxString: 1 << 62, MaxHeld: 64 << 20, MaxMemoIndex: 1 << 32}
	cases := []struct {
		name string
		in   func() []byte
		lim  Limits
		msg  string
	}{
		{"BINUNICODE8 2^62", func() []byte { return []byte("\x80\x04\x8d" + u64(1<<62) + "abc.") }, DefaultLimits, "exceeds the limit"},
		{"BINUNICODE8 2^62 no limit", func() []byte { return []byte("\x80\x04\x8d" + u64(1<<62) + "abc.") }, huge, "truncated"},
		{"BINUNICODE8 2^64-1", func() []byte { return []byte("\x80\x04\x8d" + u64(1<<64-1) + "abc.") }, huge, ""},
		{"BINBYTES8 2^63", func() []byte { return []byte("\x80\x04\x8e" + u64(1<<63) + "abc.") }, huge, ""},
		{"BYTEARRAY8 2^40", func() []byte { return []byte("\x80\x05\x96" + u64(1<<40) + "abc.") }, huge, "truncated"},
		{"BINUNICODE 4 GiB-1", func() []byte { return []byte("\x80\x02X\xff\xff\xff\xffabc.") }, huge, "truncated"},
		{"LONG4 2^31-1", func() []byte { return []byte("\x80\x02\x8b\xff\xff\xff\x7f\x01.") }, DefaultLimits, "exceeds the limit"},
		{"LONG4 2^31-1 no limit", func() []byte { return []byte("\x80\x02\x8b\xff\xff\xff\x7f\x01.") }, huge, "truncated"},
		{"LONG4 negative", func() []byte { return []byte("\x80\x02\x8b\xff\xff\xff\xff\x01.") }, huge, ""},
		{"MARK 100000 deep", func() []byte { return []byte("\x80\x02" + strings.Repeat("(", 100000) + "N.") }, DefaultLimits, "MARKs nested deeper"},
		{"2 million NONEs", func() []byte { return []byte("\x80\x02" + strings.Repeat("N", 2_000_000) + ".") }, DefaultLimits, "stack deeper than"},
		{"2 million empty lists", func() []byte { return []byte("\x80\x02" + strings.Repeat("]", 2_000_000) + ".") }, DefaultLimits, "stack deeper than"},
		{"tuple nesting 1 million", func() []byte {
			return []byte("\x80\x02N" + strings.Repeat("\x85", 1_000_000) + ".")
		}, DefaultLimits, "-"},
		{"APPENDS of a million under MaxHeld 1000", func() []byte {
			return []byte("\x80\x02](" + strings.Repeat("N", 1_000_000) + "e.")
		}, Limits{MaxStack: 1 << 20, MaxMarks: 1 << 12, MaxString: 1 << 30, MaxHeld: 1000, MaxMemoIndex: 1 << 32}, "values held"},
		{"LONG_BINPUT 2^32-1 and back", func() []byte {
			return []byte("\x80\x02Nr\xff\xff\xff\xffj\xff\xff\xff\xff\x86.")
		}, DefaultLimits, "-"},
		{"LONG_BINPUT 2^32-1 over MaxMemoIndex", func() []byte {
			return []byte("\x80\x02Nr\xff\xff\xff\xff.")
		}, Limits{MaxStack: 1 << 20, MaxMarks: 1 << 12, MaxString: 1 << 30, MaxHeld: 64 << 20, MaxMemoIndex: 1 << 20}, "absurdly large"},
		{"PUT 2^64-1", func() []byte { return []byte("\x80\x02Np18446744073709551615\n.") }, DefaultLimits, "absurdly large"},
		{"GET of a never written huge slot", func() []byte { return []byte("\x80\x02j\xff\xff\xff\xff.") }, DefaultLimits, "read before it is written"},
		// Each LONG_BINPUT is 5 bytes; the memo indices climb by 65535, just
		// under the gap that sends an index to the sparse map, so a naive dense
		// memo plan grows by 64K slots per 5 input bytes.
		{"LONG_BINPUT staircase", func() []byte {
			var b strings.Builder
			b.WriteString("\x80\x02N")
			for k := uint32(1); k <= 4096; k++ {
				b.WriteString("r" + u32(k*65535))
			}
			b.WriteString(".")
			return []byte(b.String())
		}, DefaultLimits, "-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in()
			var err error
			peak := peakHeap(func() { _, err = decodeNoPanic(t, in, c.lim) })
			if peak > memBound {
				t.Errorf("decoding %d bytes took the heap %d MiB higher", len(in), peak>>20)
			}
			t.Logf("heap peak +%d MiB", peak>>20)
			switch c.msg {
			case "-": // a valid pickle: it must decode
				if err != nil {
					t.Errorf("valid pickle failed: %v", err)
				}
			case "":
				if err == nil {
					t.Error("decoded without error")
				}
			default:
				if err == nil || !strings.Contains(err.Error(), c.msg) {
					t.Errorf("error %v, want one containing %q", err, c.msg)
				}
			}
		})
	}
}

// TestMemoIndexPastDenseRange decodes a valid pickle whose memo slot 100000 is
// first written and read while it lies beyond the plan's dense range, and read
// again after other writes have stretched the dense range over it. CPython
// loads it as (7, 7, 7).
func TestMemoIndexPastDenseRange(t *testing.T) {
	in := "\x80\x02(K\x07" +
		"r" + u32(100000) + "j" + u32(100000) + // write slot 100000 and read it back
		"r" + u32(60000) + "r" + u32(110000) + // other slots; the dense range now covers 100000
		"j" + u32(100000) + "t." // read slot 100000 again
	v, err := decodeNoPanic(t, []byte(in), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if d := plainDiff("", v.Plain(), []any{7, 7, 7}); d != "" {
		t.Fatal(d)
	}
}

// TestPutNotPlanned decodes a pickle with an explicit PUT using the plan of one
// without: the decoder skips its record of written slots when the plan saw
// every slot written once, in order, so it must refuse a PUT the plan did not
// see (an input changed between the passes) instead of trusting the plan.
func TestPutNotPlanned(t *testing.T) {
	planned := []byte{opProto, 4, opEmptyList, opMemoize, opStop}
	actual := []byte{opProto, 4, opEmptyList, opBinPut, 7, opStop}
	_, err := NewMachine(bytes.NewReader(actual), int64(len(actual)), planOf(t, planned), DefaultLimits).Run()
	if err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("decoding a PUT the plan did not see: %v", err)
	}
	// The same PUT planned from its own bytes decodes.
	if _, err := NewMachine(bytes.NewReader(actual), int64(len(actual)), planOf(t, actual), DefaultLimits).Run(); err != nil {
		t.Fatal(err)
	}
}
