package marshal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// dump writes v in a Python-like notation; an object met more than once is
// written "&N value" the first time and "*N" after, so sharing shows.
func dump(v pickle.Value) string { return dumpOpt(v, true) }

// plainDump writes v as dump does, but a shared object in full each time, as
// Python's repr would (the first 1<<16 objects; then "...").
func plainDump(v pickle.Value) string { return dumpOpt(v, false) }

func dumpOpt(v pickle.Value, sharing bool) string {
	seen := map[ident]int{}
	var count func(pickle.Value)
	count = func(v pickle.Value) {
		id, ok := identity(v)
		if ok {
			if seen[id]++; seen[id] > 1 {
				return
			}
		}
		items, _ := v.Items()
		if v.Kind == pickle.DictKind {
			items = v.Ref.(*pickle.Dict).Items
		}
		for _, it := range items {
			count(it)
		}
	}
	if sharing {
		count(v)
	}
	budget := 1 << 16
	names := map[ident]int{}
	var b strings.Builder
	var write func(pickle.Value)
	write = func(v pickle.Value) {
		if budget--; budget < 0 {
			b.WriteString("...")
			return
		}
		if id, ok := identity(v); ok && seen[id] > 1 && v.Kind != pickle.Str {
			if n, done := names[id]; done {
				fmt.Fprintf(&b, "*%d", n)
				return
			}
			names[id] = len(names) + 1
			fmt.Fprintf(&b, "&%d ", names[id])
		}
		switch v.Kind {
		case pickle.None:
			b.WriteString("None")
		case pickle.Bool:
			b.WriteString(map[bool]string{true: "True", false: "False"}[v.Num != 0])
		case pickle.Int:
			b.WriteString(strconv.FormatInt(v.Num, 10))
		case pickle.BigInt:
			fmt.Fprint(&b, v.Ref)
		case pickle.Float:
			b.WriteString(strconv.FormatFloat(math.Float64frombits(uint64(v.Num)), 'g', -1, 64))
		case pickle.Str:
			b.WriteString(strconv.Quote(v.Text))
		case pickle.Bytes:
			fmt.Fprintf(&b, "b%q", v.Text)
		case pickle.DictKind:
			b.WriteString("{")
			for i, it := range v.Ref.(*pickle.Dict).Items {
				switch {
				case i%2 == 1:
					b.WriteString(": ")
				case i > 0:
					b.WriteString(", ")
				}
				write(it)
			}
			b.WriteString("}")
		default:
			items, _ := v.Items()
			open, end := "[", "]"
			switch {
			case v.Kind == pickle.Tuple:
				open, end = "(", ")"
			case v.Kind == pickle.SetKind && v.Ref.(*pickle.Set).Frozen:
				open, end = "frozenset({", "})"
			case v.Kind == pickle.SetKind:
				open, end = "{", "}"
			}
			b.WriteString(open)
			for i, it := range items {
				if i > 0 {
					b.WriteString(", ")
				}
				write(it)
			}
			if len(items) == 1 && v.Kind == pickle.Tuple {
				b.WriteString(",")
			}
			b.WriteString(end)
		}
	}
	write(v)
	return b.String()
}

// dumpVSM lists a stream's frames, one a line.
func dumpVSM(t *testing.T, b []byte) string {
	t.Helper()
	r := NewReader(bytes.NewReader(b), DefaultLimits)
	var out strings.Builder
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "@%d %c device=%d %s\n", f.Offset, f.Kind, f.Device, dump(f.Value))
	}
	fmt.Fprintf(&out, "%d bytes, %d devices\n", r.Offset(), r.Devices())
	return out.String()
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGolden: the streams and payloads testdata/gen.py wrote with Python,
// decoded frame by frame.
func TestGolden(t *testing.T) {
	vsm, _ := filepath.Glob(filepath.Join("testdata", "*.vsm"))
	bin, _ := filepath.Glob(filepath.Join("testdata", "marshal_v*.bin"))
	if len(vsm) < 3 || len(bin) != 5 {
		t.Fatalf("testdata holds %d streams and %d payloads; run python3 testdata/gen.py", len(vsm), len(bin))
	}
	for _, p := range vsm {
		name := filepath.Base(p)
		golden.Check(t, name+".golden", []byte(dumpVSM(t, readTestdata(t, name))))
	}
	for _, p := range bin {
		name := filepath.Base(p)
		v, err := Unmarshal(readTestdata(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden.Check(t, name+".golden", []byte(dump(v)+"\n"))
	}
}

// TestVersionsAgree: marshal versions 0 to 4 (text floats, no references,
// short strings) decode to the same value.
func TestVersionsAgree(t *testing.T) {
	var want any
	for v := 0; v <= 4; v++ {
		got, err := Unmarshal(readTestdata(t, fmt.Sprintf("marshal_v%d.bin", v)))
		if err != nil {
			t.Fatal(err)
		}
		if v == 0 {
			want = got.Plain()
		} else if !reflect.DeepEqual(got.Plain(), want) {
			t.Errorf("version %d decodes to\n%v\nversion 0 to\n%v", v, got.Plain(), want)
		}
	}
}

// TestSharedStaysShared: an object a payload refers to again is the same Go
// object, not a copy.
func TestSharedStaysShared(t *testing.T) {
	// [L, L, S, S] with L = [1] and S = "ab", as marshal.dumps(..., 4) writes it.
	b := []byte("[\x04\x00\x00\x00" + "\xdb\x01\x00\x00\x00\xe9\x01\x00\x00\x00" + "r\x00\x00\x00\x00" +
		"\xda\x02ab" + "r\x02\x00\x00\x00")
	v, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	items := v.Ref.(*pickle.List).Items
	if items[0].Ref.(*pickle.List) != items[1].Ref.(*pickle.List) {
		t.Error("the referenced list is a copy")
	}
	if dump(v) != `[&1 [1], *1, "ab", "ab"]` {
		t.Errorf("dump = %s", dump(v))
	}
	d := NewDecoder(DefaultLimits)
	if _, err := d.Decode(b, 0); err != nil {
		t.Fatal(err)
	}
	if got := dump(pickle.Value{Kind: pickle.Tuple, Ref: d.Shared()}); got != `([1], "ab")` {
		t.Errorf("Shared() = %s", got)
	}
}

func u32(n int) string {
	return string([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
}

// TestRefused: what is not plain data, or not well formed, is an *Error at
// the offending byte, never a panic or a guess.
func TestRefused(t *testing.T) {
	cases := []struct {
		name, in, msg string
		at            int64
	}{
		{"empty", "", "ends where a value should start", 0},
		{"code object", "[\x01\x00\x00\x00c", "code object", 5},
		{"StopIteration", "S", "StopIteration", 0},
		{"Ellipsis", ".", "Ellipsis", 0},
		{"complex", "y" + strings.Repeat("\x00", 16), "complex", 0},
		{"text complex", "x\x011\x011", "complex", 0},
		{"slice", ":NNN", "slice", 0},
		{"unknown code", "(\x01\x00\x00\x00\x01", "unknown type code 0x01", 5},
		{"NULL in a list", "[\x01\x00\x00\x000", "NULL", 5},
		{"NULL as a dict value", "{N0", "a dict key with no value", 2},
		{"ref to an unfinished tuple", "\xa9\x01r\x00\x00\x00\x00", "still being read (a cycle)", 2},
		{"ref to an unfinished list", "\xdb\x01\x00\x00\x00r\x00\x00\x00\x00", "still being read (a cycle)", 5},
		{"ref out of range", "[\x01\x00\x00\x00r\x05\x00\x00\x00", "reference 5 with 0 objects", 5},
		{"negative ref", "r\xff\xff\xff\xff", "reference -1", 0},
		{"str longer than the payload", "u" + u32(1<<30) + "abc", "str of size 1073741824, only 3 bytes left", 0},
		{"list longer than the payload", "[" + u32(1<<31-1) + "N", "list of size 2147483647, only 1 bytes left", 0},
		{"negative size", "s\xff\xff\xff\xff", "bytes of size -1", 0},
		{"long longer than the payload", "l" + u32(1000) + "\x01\x00", "long of 1000 digits", 0},
		{"long digit out of range", "l\x01\x00\x00\x00\x00\x80", "digit 0 out of range", 0},
		{"unnormalized long", "l\x02\x00\x00\x00\x01\x00\x00\x00", "unnormalized", 0},
		{"hex text float", "f\x050x1p1", "float text", 0},
		{"bad text float", "f\x03abc", "float text", 0},
		{"invalid UTF-8", "u\x02\x00\x00\x00\xc3\x28", "not UTF-8", 0},
		{"list as a dict key", "{[\x00\x00\x00\x00N0", "unhashable list as a dict key", 1},
		{"tuple holding a dict as a key", "{)\x01{0N0", "unhashable tuple", 1},
		{"set in a set", "<\x01\x00\x00\x00<\x00\x00\x00\x00", "unhashable set in a set", 5},
		{"trailing bytes", "NN", "1 bytes after the marshal value", 1},
		{"dict without its end", "{", "ends inside a dict", 0},
		{"dict key without a value", "{N", "ends where a value should start", 2},
		{"truncated int", "i\x01\x00", "int of 4 bytes, only 2 left", 0},
	}
	for _, c := range cases {
		_, err := Unmarshal([]byte(c.in))
		var me *Error
		if !errors.As(err, &me) {
			t.Errorf("%s: err = %v, want an *Error", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) || me.Offset != c.at {
			t.Errorf("%s: %v, want %q at byte %d", c.name, err, c.msg, c.at)
		}
	}
}

// TestAccepted: edge cases CPython reads, read the same way.
func TestAccepted(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"FLAG_REF on True", "\xd4", "True"},
		{"int64 code", "I\x05\x00\x00\x00\x00\x00\x00\x00", "5"},
		{"Latin-1 in an ASCII str", "z\x02\xe9a", `"éa"`},
		{"lone surrogate", "u\x03\x00\x00\x00\xed\xa0\x80", `"\xed\xa0\x80"`},
		{"text inf", "f\x03inf", "+Inf"},
		{"text overflow", "f\x051e999", "+Inf"},
		{"ref to a finished tuple", "[\x02\x00\x00\x00\xa9\x01Nr\x00\x00\x00\x00", "[&1 (None,), *1]"},
		{"empty long", "l\x00\x00\x00\x00", "0"},
		{"2**64", "l\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00", "18446744073709551616"},
		{"-2**63", "l\xfb\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00", "-9223372036854775808"},
		{"frozenset key", "{>\x01\x00\x00\x00NN0", "{frozenset({None}): None}"},
	}
	for _, c := range cases {
		v, err := Unmarshal([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if got := dump(v); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestDepth: nesting, and what references expand to, stop at MaxDepth.
func TestDepth(t *testing.T) {
	deep := strings.Repeat(")\x01", 50) + "N"
	d := NewDecoder(Limits{MaxDepth: 50})
	if _, err := d.Decode([]byte(deep), 0); err != nil {
		t.Errorf("50 deep with a limit of 50: %v", err)
	}
	if _, err := d.Decode([]byte(")\x01"+deep), 0); err == nil || !strings.Contains(err.Error(), "nested deeper than 50") {
		t.Errorf("51 deep: %v", err)
	}
	// A 30-deep list, then a 30-deep list around a reference to it: 60 deep
	// once expanded.
	nest := func(n int, inner string) string {
		return strings.Repeat("[\x01\x00\x00\x00", n) + inner
	}
	b := "[\x02\x00\x00\x00" + "\xdb\x01\x00\x00\x00" + nest(28, "N") + nest(29, "r\x00\x00\x00\x00")
	if _, err := d.Decode([]byte(b), 0); err == nil || !strings.Contains(err.Error(), "nests deeper than 50") {
		t.Errorf("a reference expanding past the limit: %v", err)
	}
	if _, err := NewDecoder(Limits{MaxDepth: 61}).Decode([]byte(b), 0); err != nil {
		t.Errorf("the same with a limit of 61: %v", err)
	}
}
