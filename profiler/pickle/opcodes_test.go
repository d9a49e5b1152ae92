package pickle

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func intsWant() []any {
	return []any{0, 1, 255, 256, 65535, 65536, -1, -256, math.MaxInt32, math.MinInt32, 1 << 31, -(1 << 31) - 1,
		int64(math.MaxInt64), int64(math.MinInt64), pow2(63, false), bigInt("18446744073709551615"),
		bigInt("-9223372036854775809"), pow2(100, false), pow2(100, true), pow2(4000, false), pow2(4000, true)}
}

func memoManyWant() []any {
	var fwd, rev []any
	for i := 0; i < 300; i++ {
		fwd = append(fwd, []any{i})
		rev = append(rev, []any{299 - i})
	}
	return []any{fwd, rev}
}

func rangeWant(lo, hi int) []any {
	out := make([]any, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, int64(i))
	}
	return out
}

// caseWant is what each generated case (testdata/gen_cases.py) decodes to, as
// Value.Plain() writes it. Cyclic cases are checked by TestOpcodeCycles.
var caseWant = map[string]any{
	"none_bool": []any{nil, true, false},
	"ints":      intsWant(),
	"floats":    []any{0.0, math.Copysign(0, -1), 1.5, -2.25, 1e308, 5e-324, math.Inf(1), math.Inf(-1), math.NaN()},
	"strings": []any{"", "a", "ascii", "héllo wörld", "日本語テキスト", "🚀 emoji", strings.Repeat("x", 255),
		strings.Repeat("y", 256), strings.Repeat("ü", 200), "\x00nul\x00", "tab\tnew\nline"},
	"bytes":     []any{[]byte{}, []byte{0, 0xff}, []byte(strings.Repeat("a", 300))},
	"bytearray": []any{[]byte("abc"), make([]byte, 10)},
	"tuples": []any{[]any{}, []any{1}, []any{1, 2}, []any{1, 2, 3}, []any{1, 2, 3, 4},
		[]any{[]any{}, []any{[]any{}}}, rangeWant(0, 10)},
	"nested": map[string]any{"a": []any{1, map[string]any{"b": []any{2, []any{3}}}},
		"c": map[string]any{"d": map[string]any{}}, "e": []any{}, "f": []any{nil, true, false}},
	// Plain formats keys that are not strings with fmt.Sprint.
	"dict_keys": map[string]any{"1": "one", "[1 2]": "tuple", "<nil>": "none", "2.5": "float", "s": "str"},
	"sets":      []any{[]any{1, 2, 3}, []any{4}, []any{}, []any{}},
	// A frozenset is hashable, so Python accepts it as a dict key.
	"frozenset_key": map[string]any{"[1 2]": "fs"},
	"single":        []any{[]any{7}, map[string]any{"k": 1}},
	"big_list":      rangeWant(0, 2001),
	"big_dict": func() any {
		m := map[string]any{}
		for i := 0; i < 1001; i++ {
			m[fmt.Sprint(i)] = int64(i)
		}
		return m
	}(),
	"big_set":   rangeWant(0, 1001),
	"memo_many": memoManyWant(),
	"shared": []any{[]any{1, 2}, []any{1, 2}, map[string]any{"x": []any{1, 2}, "s": "a shared string"},
		"a shared string"},
	"frames": rangeWant(256, 256+23000),
}

// refusedIn names the opcode CPython's pickler needs for a case in the old
// protocols (a GLOBAL to rebuild bytes, bytearray or sets), which the decoder
// must refuse rather than decode.
var refusedIn = map[string]map[int]string{
	"bytes":     {2: "GLOBAL"},
	"bytearray": {2: "GLOBAL", 3: "GLOBAL", 4: "STACK_GLOBAL"},
	"sets":      {2: "GLOBAL", 3: "GLOBAL"},
}

// TestOpcodes decodes every pickle that CPython wrote for protocols 2-5
// (testdata/cases, see gen_cases.py) and compares it with the Go value.
func TestOpcodes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(casesDir, "*.pickle"))
	if len(files) < 70 {
		t.Fatalf("only %d generated cases under %s; run testdata/gen_cases.py", len(files), casesDir)
	}
	seen := map[string]bool{}
	for _, path := range files {
		base := strings.TrimSuffix(filepath.Base(path), ".pickle")
		i := strings.LastIndex(base, "_p")
		name := base[:i]
		var proto int
		fmt.Sscanf(base[i+2:], "%d", &proto)
		seen[name] = true
		t.Run(base, func(t *testing.T) {
			b := readFile(t, path)
			v, err := decodeNoPanic(t, b, DefaultLimits)
			if op, ok := refusedIn[name][proto]; ok {
				pe := pickleErr(t, err, "refusing opcode "+op+":")
				if pe.Offset < 0 || pe.Offset >= int64(len(b)) {
					t.Fatalf("offset %d outside the input", pe.Offset)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, ok := caseWant[name]
			if !ok {
				if _, cyclic := cyclicCases[name]; cyclic {
					return
				}
				t.Fatalf("no expectation for case %q", name)
			}
			if d := plainDiff("", v.Plain(), want); d != "" {
				t.Fatal(d)
			}
		})
	}
	for name := range caseWant {
		if !seen[name] {
			t.Errorf("case %q has no generated file", name)
		}
	}
}

// TestOpcodeSharing checks that memo reads give back the very same object:
// the same list referenced twice must be the same *List.
func TestOpcodeSharing(t *testing.T) {
	for _, proto := range []int{2, 3, 4, 5} {
		t.Run(fmt.Sprint(proto), func(t *testing.T) {
			v, err := Decode(readFile(t, filepath.Join(casesDir, fmt.Sprintf("shared_p%d.pickle", proto))), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			items, _ := v.Items()
			a, b := items[0].Ref.(*List), items[1].Ref.(*List)
			x, _ := items[2].Ref.(*Dict).Get("x")
			if a != b || x.Ref.(*List) != a {
				t.Fatalf("the shared list was decoded as distinct objects: %p %p %p", a, b, x.Ref)
			}

			v, err = Decode(readFile(t, filepath.Join(casesDir, fmt.Sprintf("memo_many_p%d.pickle", proto))), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			halves, _ := v.Items()
			fwd, _ := halves[0].Items()
			rev, _ := halves[1].Items()
			for i := range fwd {
				if fwd[i].Ref.(*List) != rev[len(rev)-1-i].Ref.(*List) {
					t.Fatalf("memo slot for list %d gave back a different object", i)
				}
			}
		})
	}
}

var cyclicCases = map[string]bool{"self_list": true, "self_dict": true, "recursive_tuple1": true, "recursive_tuple4": true}

// TestOpcodeCycles decodes self-referencing objects (Python writes them with
// memo reads, and POP/POP_MARK for recursive tuples) and checks the cycle by
// identity; Plain() cannot be used on them.
func TestOpcodeCycles(t *testing.T) {
	for _, proto := range []int{2, 3, 4, 5} {
		load := func(name string) Value {
			t.Helper()
			v, err := Decode(readFile(t, filepath.Join(casesDir, fmt.Sprintf("%s_p%d.pickle", name, proto))), DefaultLimits)
			if err != nil {
				t.Fatalf("%s_p%d: %v", name, proto, err)
			}
			return v
		}
		t.Run(fmt.Sprint(proto), func(t *testing.T) {
			// l = []; l.append(l)
			v := load("self_list")
			l := v.Ref.(*List)
			if v.Kind != ListKind || len(l.Items) != 1 || l.Items[0].Ref.(*List) != l {
				t.Fatalf("self_list: %#v", v)
			}
			// d = {}; d["self"] = d
			v = load("self_dict")
			d := v.Ref.(*Dict)
			if self, ok := d.Get("self"); v.Kind != DictKind || !ok || self.Ref.(*Dict) != d || d.Len() != 1 {
				t.Fatalf("self_dict: %#v", v)
			}
			// l = []; t = (l,) or (l, 1, 2, 3); l.append(t)
			for _, c := range []struct {
				name string
				n    int
			}{{"recursive_tuple1", 1}, {"recursive_tuple4", 4}} {
				v = load(c.name)
				tup, ok := v.Items()
				if v.Kind != Tuple || !ok || len(tup) != c.n {
					t.Fatalf("%s: %#v", c.name, v)
				}
				inner := tup[0].Ref.(*List)
				if len(inner.Items) != 1 || inner.Items[0].Kind != Tuple {
					t.Fatalf("%s: inner list %#v", c.name, inner.Items)
				}
				again, _ := inner.Items[0].Items()
				if len(again) != c.n || again[0].Ref.(*List) != inner {
					t.Fatalf("%s: the tuple inside the list is not the outer tuple", c.name)
				}
				for i := 1; i < c.n; i++ {
					if n, _ := tup[i].AsInt(); n != int64(i) {
						t.Fatalf("%s: item %d is %v", c.name, i, tup[i].Plain())
					}
				}
			}
		})
	}
}

// TestHandAssembled covers opcodes CPython's pickler never writes for
// protocols 2-5 (BINUNICODE8 needs a 4 GiB string, DUP is never emitted, the
// text opcodes belong to protocols 0 and 1), plus edge encodings.
func TestHandAssembled(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want any
	}{
		{"BINUNICODE8", "\x80\x04\x8d" + u64(6) + "h\xc3\xa9llo.", "héllo"},
		{"BINUNICODE8 empty", "\x80\x04\x8d" + u64(0) + ".", ""},
		{"BINUNICODE8 in FRAME", "\x80\x04\x95" + u64(14) + "\x8d" + u64(4) + "\xf0\x9f\x9a\x80\x94.", "🚀"},
		{"BINBYTES8", "\x80\x04\x8e" + u64(3) + "abc.", []byte("abc")},
		{"BYTEARRAY8", "\x80\x05\x96" + u64(2) + "\x00\x01.", []byte{0, 1}},
		{"BINUNICODE non-ASCII", "\x80\x02X" + u32(7) + "gr\xc3\xbc\xc3\x9fe.", "grüße"},
		{"SHORT_BINUNICODE non-ASCII", "\x80\x04\x8c\x06\xe2\x82\xac\xc2\xa2\x31.", "€¢1"},
		{"SHORT_BINSTRING", "\x80\x02U\x03abc.", "abc"},
		{"BINSTRING", "\x80\x02T" + u32(3) + "abc.", "abc"},
		{"SHORT_BINBYTES", "\x80\x03C\x02\xff\x00.", []byte{0xff, 0}},
		{"BINBYTES", "\x80\x03B" + u32(1) + "z.", []byte("z")},
		{"DUP", "\x80\x02K\x052\x86.", []any{5, 5}},
		{"PUT GET text", "\x80\x02]p7\ng7\n\x86.", []any{[]any{}, []any{}}},
		{"INT", "\x80\x02I42\n.", 42},
		{"INT negative", "\x80\x02I-7\n.", -7},
		{"INT true", "\x80\x02I01\n.", true},
		{"INT false", "\x80\x02I00\n.", false},
		{"INT big", "\x80\x02I99999999999999999999\n.", bigInt("99999999999999999999")},
		{"LONG", "\x80\x02L123L\n.", 123},
		{"LONG big negative", "\x80\x02L-99999999999999999999L\n.", bigInt("-99999999999999999999")},
		{"FLOAT", "\x80\x02F1.5\n.", 1.5},
		{"FLOAT negative zero", "\x80\x02F-0.0\n.", math.Copysign(0, -1)},
		{"BINFLOAT NaN payload", "\x80\x02G\x7f\xf8\x00\x00\x00\x00\x00\x01.", math.Float64frombits(0x7ff8000000000001)},
		{"BININT negative", "\x80\x02J\xff\xff\xff\xff.", -1},
		{"BININT min", "\x80\x02J\x00\x00\x00\x80.", math.MinInt32},
		{"BININT2 max", "\x80\x02M\xff\xff.", 65535},
		{"LONG1 empty is zero", "\x80\x02\x8a\x00.", 0},
		{"LONG1 -1", "\x80\x02\x8a\x01\xff.", -1},
		{"LONG1 8 bytes min", "\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.", int64(math.MinInt64)},
		{"LONG1 9 bytes 2**64-1", "\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00.", bigInt("18446744073709551615")},
		{"LONG1 9 bytes fits int64", "\x80\x02\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00.", 1},
		{"LONG4 small", "\x80\x02\x8b" + u32(2) + "\xff\x7f.", 32767},
		{"LONG4 empty", "\x80\x02\x8b" + u32(0) + ".", 0},
		{"MARK LIST", "\x80\x02(K\x01K\x02l.", []any{1, 2}},
		{"MARK LIST empty", "\x80\x02(l.", []any{}},
		{"MARK DICT", "\x80\x02(U\x01aK\x01U\x01bK\x02d.", map[string]any{"a": 1, "b": 2}},
		{"MARK TUPLE", "\x80\x02(K\x01K\x02K\x03K\x04t.", []any{1, 2, 3, 4}},
		{"MARK TUPLE empty", "\x80\x02(t.", []any{}},
		{"EMPTY_SET ADDITEMS", "\x80\x04\x8f(K\x01K\x02\x90.", []any{1, 2}},
		{"FROZENSET", "\x80\x04(K\x03\x91.", []any{3}},
		{"APPENDS empty batch", "\x80\x02](e.", []any{}},
		{"SETITEMS empty batch", "\x80\x02}(u.", map[string]any{}},
		{"duplicate key: last wins", "\x80\x02}(U\x01aK\x01U\x01aK\x02u.", map[string]any{"a": 2}},
		{"POP", "\x80\x02NK\x010.", nil},
		{"POP_MARK", "\x80\x02N(K\x01K\x021.", nil},
		{"second PROTO", "\x80\x02\x80\x04N.", nil},
		{"MEMOIZE then BINGET", "\x80\x04]\x94h\x00\x86.", []any{[]any{}, []any{}}},
		{"LONG_BINPUT LONG_BINGET", "\x80\x02]r" + u32(70000) + "j" + u32(70000) + "\x86.", []any{[]any{}, []any{}}},
		{"memo slot overwritten", "\x80\x02K\x01q\x00K\x02q\x00h\x00\x86.", []any{2, 2}},
		{"memo read twice", "\x80\x02K\x01q\x000h\x00h\x00\x86.", []any{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := decodeNoPanic(t, []byte(c.in), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if d := plainDiff("", v.Plain(), c.want); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestMemoIdentityHand checks memo identity for the hand-assembled memo forms.
func TestMemoIdentityHand(t *testing.T) {
	for _, in := range []string{
		"\x80\x02]p7\ng7\n\x86.",
		"\x80\x04]\x94h\x00\x86.",
		"\x80\x02]q\x05h\x05\x86.",
		"\x80\x02]r" + u32(70000) + "j" + u32(70000) + "\x86.",
		"\x80\x02]2\x86.", // DUP
	} {
		v, err := Decode([]byte(in), DefaultLimits)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		items, _ := v.Items()
		if items[0].Ref.(*List) != items[1].Ref.(*List) {
			t.Errorf("%q: the two references are different lists", in)
		}
	}
}

// TestLargeStrings covers strings longer than the reader's buffer and strings
// that straddle a buffer refill.
func TestLargeStrings(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", (3<<20)/16) // 3 MiB: read past the buffer
	near := strings.Repeat("é", (1<<20)/2-3)              // just under 1 MiB
	in := "\x80\x04(" +
		"X" + u32(uint32(len(near))) + near +
		"\x8d" + u64(uint64(len(big))) + big +
		"B" + u32(uint32(len(big))) + big +
		"X" + u32(uint32(len(near))) + near +
		"\x8c\x03end" +
		"l."
	v, err := Decode([]byte(in), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{near, big, []byte(big), near, "end"}
	if d := plainDiff("", v.Plain(), want); d != "" {
		t.Fatal(d)
	}
}

// TestHandErrors checks that malformed pickles fail with a *Error naming the
// problem at the offset of the opcode at fault.
func TestHandErrors(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		msg    string
		offset int64
	}{
		{"protocol 6", "\x80\x06N.", "unsupported pickle protocol 6", 0},
		{"STOP on empty stack", "\x80\x02.", "STOP with an empty stack", 2},
		{"APPEND underflow", "\x80\x02a.", "stack underflow", 2},
		{"APPENDS without MARK", "\x80\x02]e.", "no MARK", 3},
		{"memo read before write", "\x80\x02h\x00.", "memo slot 0 is read before it is written", 2},
		{"DICT odd", "\x80\x02(U\x01ad.", "odd number", 6},
		{"SETITEMS odd", "\x80\x02}(U\x01au.", "odd number", 7},
		{"list as dict key", "\x80\x02}]]s.", "unhashable dict key of type list", 5},
		{"dict as dict key", "\x80\x02}}Ns.", "unhashable dict key of type dict", 5},
		{"APPEND on None", "\x80\x02NNa.", "APPEND on a None", 4},
		{"APPEND on a set", "\x80\x04\x8fNa.", "APPEND on a set", 4},
		{"SETITEM on a list", "\x80\x02]NNs.", "SETITEMS on a list", 5},
		{"ADDITEMS on a list", "\x80\x04](K\x01\x90.", "ADDITEMS on a list", 6},
		{"text STRING", "\x80\x02S'x'\n.", "text-mode string opcodes", 2},
		{"text UNICODE", "\x80\x02Vx\n.", "text-mode string opcodes", 2},
		{"unknown opcode", "\x80\x02\xff.", "not a pickle opcode: 0xff", 2},
		{"unknown opcode zero", "\x80\x02\x00.", "not a pickle opcode: 0x00", 2},
		{"bad INT", "\x80\x02Ixyz\n.", "bad integer", 2},
		{"bad FLOAT", "\x80\x02Fxyz\n.", "bad FLOAT", 2},
		{"bad memo index", "\x80\x02Ngx\n.", "bad memo index", 3},
		{"long text argument", "\x80\x02I" + strings.Repeat("1", 5000) + "\n.", "longer than 4096 bytes", 2},
		{"BINSTRING negative", "\x80\x02T\xff\xff\xff\xff.", "negative string length", 2},
		{"TUPLE3 underflow", "\x80\x02NN\x87.", "stack underflow", 4},
		{"TUPLE2 across MARK", "\x80\x02N(N\x86.", "stack underflow", 5},
		{"POP across MARK", "\x80\x02N(0.", "stack underflow", 4},
		{"PUT across MARK", "\x80\x02N(q\x00.", "empty stack", 4},
		{"STOP with open MARK", "\x80\x02(.", "STOP with an empty stack", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeNoPanic(t, []byte(c.in), DefaultLimits)
			pe := pickleErr(t, err, c.msg)
			if pe.Offset != c.offset {
				t.Fatalf("error %q at offset %d, want %d", err, pe.Offset, c.offset)
			}
		})
	}
}

// TestLimits checks that each Limits field is enforced.
func TestLimits(t *testing.T) {
	lim := func(f func(*Limits)) Limits { l := DefaultLimits; f(&l); return l }
	cases := []struct {
		name string
		in   string
		lim  Limits
		msg  string
	}{
		{"MaxStack", "\x80\x02" + strings.Repeat("N", 11) + ".", lim(func(l *Limits) { l.MaxStack = 10 }), "stack deeper than 10"},
		{"MaxMarks", "\x80\x02" + strings.Repeat("(", 6) + "N.", lim(func(l *Limits) { l.MaxMarks = 5 }), "MARKs nested deeper than 5"},
		{"MaxString", "\x80\x02X" + u32(4) + "abcd.", lim(func(l *Limits) { l.MaxString = 3 }), "exceeds the limit of 3"},
		{"MaxString bytes8", "\x80\x04\x8e" + u64(4) + "abcd.", lim(func(l *Limits) { l.MaxString = 3 }), "exceeds the limit of 3"},
		{"MaxHeld", "\x80\x02](" + strings.Repeat("N", 10) + "e.", lim(func(l *Limits) { l.MaxHeld = 5 }), "more than 5 values held"},
		{"MaxHeld dict", "\x80\x02}(" + strings.Repeat("K\x01N", 4) + "u.", lim(func(l *Limits) { l.MaxHeld = 5 }), "more than 5 values held"},
		{"MaxMemoIndex", "\x80\x02Nr" + u32(101) + ".", lim(func(l *Limits) { l.MaxMemoIndex = 100 }), "absurdly large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeNoPanic(t, []byte(c.in), c.lim)
			pickleErr(t, err, c.msg)
			// The same input decodes under the default limits.
			if _, err := Decode([]byte(c.in), DefaultLimits); err != nil {
				t.Fatalf("fails under DefaultLimits too: %v", err)
			}
		})
	}
}
