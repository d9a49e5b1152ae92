package pickle

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// fuzzLimits keep a fuzzed input's footprint small; the default limits would
// let a few kilobytes of MARKs and DUPs hold hundreds of megabytes.
var fuzzLimits = Limits{MaxStack: 1 << 16, MaxMarks: 1 << 10, MaxString: 1 << 20, MaxHeld: 1 << 18, MaxMemoIndex: 1 << 32}

// plainSafe reports whether Plain() can be called on v: no cycles (it would
// recurse forever) and a small expanded size (shared objects are expanded, so
// a chain of DUP+TUPLE2 doubles per two bytes of input).
func plainSafe(v Value) bool {
	const budget = 1 << 16
	n := 0
	onPath := map[any]bool{}
	var walk func(Value) bool
	walk = func(v Value) bool {
		if n++; n > budget {
			return false
		}
		id := identity(v)
		if id != nil {
			if onPath[id] {
				return false
			}
			onPath[id] = true
			defer delete(onPath, id)
		}
		if v.Kind == DictKind {
			for _, it := range v.Ref.(*Dict).Items {
				if !walk(it) {
					return false
				}
			}
			return true
		}
		items, _ := v.Items()
		for _, it := range items {
			if !walk(it) {
				return false
			}
		}
		return true
	}
	return walk(v)
}

// FuzzDecode: Decode never panics; an error is always a *Error at an offset
// inside the input (or at its end); a success decodes again to the same value,
// and to the same value when the input arrives a byte at a time.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"cuda_graph.pickle", "expandable.pickle", "leak_steps.pickle"} {
		f.Add(readFile(f, filepath.Join(exampleDir, p)))
	}
	cases, _ := filepath.Glob(filepath.Join(casesDir, "*.pickle"))
	refused, _ := filepath.Glob(filepath.Join("testdata", "refused", "*.pickle"))
	for _, p := range append(cases, refused...) {
		if b := readFile(f, p); len(b) <= 4096 {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"\x80\x04\x8d" + u64(6) + "h\xc3\xa9llo.",
		"\x80\x02]p7\ng7\n\x86.",
		"\x80\x02K\x052\x86.",
		"\x80\x04\x8f(K\x01K\x02\x90.",
		"\x80\x02(K\x07r" + u32(100000) + "j" + u32(100000) + "r" + u32(60000) + "r" + u32(110000) + "j" + u32(100000) + "t.",
		"\x80\x02}]q\x00h\x00a\x85Ns.",
		"\x80\x02](e.",
		"\x80\x02I01\nF1.5\nL5L\n\x87.",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// A hang would stall the fuzzer silently; crash instead, so the input is kept.
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("decoding %q took over 10s", b)) })
		defer watchdog.Stop()
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic: %v", r)
			}
		}()
		v, err := Decode(b, fuzzLimits)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *pickle.Error", err, err)
			}
			if pe.Offset < 0 || pe.Offset > int64(len(b)) {
				t.Fatalf("error offset %d outside the %d-byte input: %v", pe.Offset, len(b), err)
			}
			return
		}
		want := digestOf(v)
		v2, err := Decode(b, fuzzLimits)
		if err != nil {
			t.Fatalf("second decode failed: %v", err)
		}
		if digestOf(v2) != want {
			t.Fatal("second decode gave a different value")
		}
		if plainSafe(v) {
			if d := plainDiff("", v2.Plain(), v.Plain()); d != "" {
				t.Fatalf("second decode gave a different Plain(): %s", d)
			}
		}
		plan, err := Scan(iotest.OneByteReader(bytes.NewReader(b)), int64(len(b)), fuzzLimits)
		if err != nil {
			t.Fatalf("scan a byte at a time failed: %v", err)
		}
		v3, err := NewMachine(iotest.OneByteReader(bytes.NewReader(b)), -1, plan, fuzzLimits).Run()
		if err != nil {
			t.Fatalf("decoding a byte at a time failed: %v", err)
		}
		if digestOf(v3) != want {
			t.Fatal("decoding a byte at a time gave a different value")
		}
	})
}

// FuzzScanAt: nothing the serial planner rejects decodes with the parallel
// planner's plan, and when both plan, decoding with either gives the same value.
func FuzzScanAt(f *testing.F) {
	for _, p := range []string{"cuda_graph.pickle", "expandable.pickle"} {
		f.Add(readFile(f, filepath.Join(exampleDir, p)))
	}
	pad1, pad2 := strings.Repeat("N0", 60), strings.Repeat("N0", 40)
	f.Add(framed("]\x94"+pad1, pad2+"h\x00\x86."))
	f.Add(framed(pad1+"]h\x01", pad2+"\x94\x94\x86."))
	f.Add(framed("(\x8c\x01a\x94"+pad1, "h\x00"+pad2, "h\x00h\x00l."))
	f.Fuzz(func(t *testing.T, b []byte) {
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("planning %q took over 10s", b)) })
		defer watchdog.Stop()
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic: %v", r)
			}
		}()
		pplan, perr := ScanAt(bytes.NewReader(b), int64(len(b)), fuzzLimits, 3)
		if perr != nil {
			var pe *Error
			if !errors.As(perr, &pe) {
				t.Fatalf("error %v (%T) is not a *pickle.Error", perr, perr)
			}
			return
		}
		v1, err1 := NewMachine(bytes.NewReader(b), int64(len(b)), pplan, fuzzLimits).Run()
		splan, serr := Scan(bytes.NewReader(b), int64(len(b)), fuzzLimits)
		if serr != nil {
			if err1 == nil {
				t.Fatalf("decoded with ScanAt's plan what Scan rejects: %v", serr)
			}
			return
		}
		v2, err2 := NewMachine(bytes.NewReader(b), int64(len(b)), splan, fuzzLimits).Run()
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("decoding with ScanAt's plan: %v; with Scan's: %v", err1, err2)
		}
		if err1 == nil && digestOf(v1) != digestOf(v2) {
			t.Fatal("the two plans decode to different values")
		}
	})
}
