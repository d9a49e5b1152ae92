package pickle_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// node describes a value two ways: as Writer calls, and as a Python expression
// that builds the same objects with the same sharing, so that CPython's
// pickle.dumps(obj, protocol=4) can be compared byte for byte.
type node interface {
	write(w *pickle.Writer)
	py(b *strings.Builder)
}

type (
	nNone  struct{}
	nBool  bool
	nInt   int64
	nUint  uint64
	nBig   struct{ x *big.Int }
	nFloat float64
	nStr   string // a new str object each time (len >= 2: CPython caches shorter ones)
	nKey   string // one shared str object per text
	nBytes string
	nList  []node
	nTuple []node
	nDict  []node // key, value, key, value, …
	nShare struct {
		name string
		v    node // a list or dict
	}
	nUse string // a GET of a shared list or dict
	// nListOf is a list written with BeginListOf (its length declared).
	nListOf []node
	// nStrs is the list ['s<from>', …, 's<to-1>'] of new strs, which Python
	// builds faster from a comprehension than from a literal.
	nStrs struct{ from, to int }
)

func (n nStrs) write(w *pickle.Writer) {
	w.BeginList()
	for i := n.from; i < n.to; i++ {
		w.Str("s" + strconv.Itoa(i))
	}
	w.EndList()
}

func (n nStrs) py(b *strings.Builder) {
	fmt.Fprintf(b, "['s%%d' %% i for i in range(%d, %d)]", n.from, n.to)
}

func (nNone) write(w *pickle.Writer)    { w.None() }
func (n nBool) write(w *pickle.Writer)  { w.Bool(bool(n)) }
func (n nInt) write(w *pickle.Writer)   { w.Int(int64(n)) }
func (n nUint) write(w *pickle.Writer)  { w.Uint(uint64(n)) }
func (n nBig) write(w *pickle.Writer)   { w.BigInt(n.x) }
func (n nFloat) write(w *pickle.Writer) { w.Float(float64(n)) }
func (n nStr) write(w *pickle.Writer)   { w.Str(string(n)) }
func (n nKey) write(w *pickle.Writer)   { w.Key(string(n)) }
func (n nBytes) write(w *pickle.Writer) { w.Bytes([]byte(n)) }
func (n nList) write(w *pickle.Writer) {
	w.BeginList()
	for _, it := range n {
		it.write(w)
	}
	w.EndList()
}
func (n nListOf) write(w *pickle.Writer) {
	w.BeginListOf(int64(len(n)))
	for _, it := range n {
		it.write(w)
	}
	w.EndList()
}
func (n nTuple) write(w *pickle.Writer) {
	w.BeginTuple()
	for _, it := range n {
		it.write(w)
	}
	w.EndTuple()
}
func (n nDict) write(w *pickle.Writer) {
	w.BeginDict()
	for _, it := range n {
		it.write(w)
	}
	w.EndDict()
}
func (n nShare) write(w *pickle.Writer) {
	switch v := n.v.(type) {
	case nList:
		w.Bind(n.name, w.BeginList())
		for _, it := range v {
			it.write(w)
		}
		w.EndList()
	case nDict:
		w.Bind(n.name, w.BeginDict())
		for _, it := range v {
			it.write(w)
		}
		w.EndDict()
	default:
		panic("share a list or dict")
	}
}
func (n nUse) write(w *pickle.Writer) {
	if !w.Ref(string(n)) {
		panic("unbound " + string(n))
	}
}

func (nNone) py(b *strings.Builder) { b.WriteString("None") }
func (n nBool) py(b *strings.Builder) {
	if n {
		b.WriteString("True")
	} else {
		b.WriteString("False")
	}
}
func (n nInt) py(b *strings.Builder)  { b.WriteString(strconv.FormatInt(int64(n), 10)) }
func (n nUint) py(b *strings.Builder) { b.WriteString(strconv.FormatUint(uint64(n), 10)) }
func (n nBig) py(b *strings.Builder)  { b.WriteString(n.x.String()) }
func (n nFloat) py(b *strings.Builder) {
	fmt.Fprintf(b, "struct.unpack('>d', bytes.fromhex('%016x'))[0]", math.Float64bits(float64(n)))
}
func (n nStr) py(b *strings.Builder) {
	if len(n) < 2 {
		panic("CPython shares str objects shorter than 2; use nKey")
	}
	fmt.Fprintf(b, "_new(bytes.fromhex('%x').decode())", string(n))
}
func (n nKey) py(b *strings.Builder)   { fmt.Fprintf(b, "_key(bytes.fromhex('%x').decode())", string(n)) }
func (n nBytes) py(b *strings.Builder) { fmt.Fprintf(b, "bytes.fromhex('%x')", string(n)) }
func pyItems(b *strings.Builder, items []node) {
	for _, it := range items {
		it.py(b)
		b.WriteString(", ")
	}
}
func (n nList) py(b *strings.Builder)   { b.WriteString("["); pyItems(b, n); b.WriteString("]") }
func (n nListOf) py(b *strings.Builder) { nList(n).py(b) }
func (n nTuple) py(b *strings.Builder) {
	b.WriteString("tuple([") // a new tuple object: literal tuples are shared constants
	pyItems(b, n)
	b.WriteString("])")
}
func (n nDict) py(b *strings.Builder) {
	b.WriteString("{")
	for i := 0; i+1 < len(n); i += 2 {
		n[i].py(b)
		b.WriteString(": ")
		n[i+1].py(b)
		b.WriteString(", ")
	}
	b.WriteString("}")
}
func (n nShare) py(b *strings.Builder) {
	fmt.Fprintf(b, "(_v_%s := ", n.name)
	n.v.py(b)
	b.WriteString(")")
}
func (n nUse) py(b *strings.Builder) { fmt.Fprintf(b, "_v_%s", string(n)) }

func pyExpr(n node) string {
	var b strings.Builder
	n.py(&b)
	return b.String()
}

func encode(t testing.TB, n node) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pickle.NewWriter(&buf)
	n.write(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ints(from, to int64, f func(int64) node) nList {
	var l nList
	for i := from; i < to; i++ {
		l = append(l, f(i))
	}
	return l
}

func big10(s string) *big.Int {
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return x
}

type wcase struct {
	name string
	v    node
	// same: the output must equal CPython's byte for byte.
	same bool
}

func writerCases() []wcase {
	edge := nList{}
	for _, n := range []int64{0, 1, 255, 256, 65535, 65536, -1, -255, -256, math.MaxInt32, math.MaxInt32 + 1,
		math.MinInt32, math.MinInt32 - 1, 1 << 39, -(1 << 39), -(1 << 39) - 1, 1<<40 - 1, -128 << 32, 127 << 48,
		-(1 << 55), 1 << 55, math.MaxInt64, math.MinInt64, 139817224503296, 1795939393820855} {
		edge = append(edge, nInt(n))
	}
	edge = append(edge, nUint(1<<63), nUint(math.MaxUint64), nUint(12345),
		nBig{big10("18446744073709551616")}, nBig{big10("-18446744073709551616")},
		nBig{big10("-9223372036854775809")}, nBig{big10("-340282366920938463463374607431768211456")},
		nBig{new(big.Int).Lsh(big.NewInt(1), 2100)}, nBig{new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(3), 2100))},
		nBig{big.NewInt(-5)})
	dictMixed := nDict{}
	for i := 0; i < 50; i++ {
		dictMixed = append(dictMixed, nStr(fmt.Sprintf("k%d", i)))
		if i%2 == 1 {
			dictMixed = append(dictMixed, nInt(int64(i*i*1000003)))
		} else {
			dictMixed = append(dictMixed, nStr(fmt.Sprintf("v%d", i)))
		}
	}
	bigDict := func(n int) nDict {
		d := nDict{}
		for i := 0; i < n; i++ {
			d = append(d, nStr(fmt.Sprintf("key%d", i)), nInt(int64(i)))
		}
		return d
	}
	entries := nList{}
	for i := 0; i < 1500; i++ {
		entries = append(entries, nDict{nKey("action"), nKey("alloc"), nKey("addr"), nInt(139817224503296 + int64(i)*512),
			nKey("size"), nInt(int64(i) * 4096), nKey("frames"), nUse("fr"), nKey("compile_context"), nStr("N/A")})
	}
	return []wcase{
		{"int", nInt(1), true},
		{"none", nNone{}, true},
		{"empty list", nList{}, true},
		{"one-item list", nList{nInt(1)}, true},
		{"one-pair dict", nDict{nKey("a"), nInt(1)}, true},
		{"dict of ints and strs", dictMixed, true},
		{"list of 2500 ints", ints(0, 2500, func(i int64) node { return nInt(i) }), true},
		{"list of 2500 varied ints", ints(0, 2500, func(i int64) node {
			return nInt((i*7919*7919*7919 + i) * (1 - 2*(i%2)))
		}), true},
		{"list of 1000 and 1001", nList{ints(0, 1000, func(i int64) node { return nInt(i) }),
			ints(0, 1001, func(i int64) node { return nInt(i) })}, true},
		{"nested lists", nList{nList{}, nList{nInt(1)}, nList{nList{nInt(2), nInt(3)}, nList{nList{}}},
			nList{nList{nInt(0)}, nList{nInt(1)}, nList{nList{nList{nInt(2)}}}}}, true},
		{"dicts of 1000 and 2001", nList{bigDict(1000), bigDict(2001), bigDict(2000), nDict{}}, true},
		{"ints", edge, true},
		{"floats", nList{nFloat(0), nFloat(math.Copysign(0, -1)), nFloat(1.5), nFloat(-2.25e-300), nFloat(math.Inf(1)),
			nFloat(math.Inf(-1)), nFloat(math.Float64frombits(0x7ff8000000000000)), nFloat(1e300)}, true},
		{"atoms", nList{nNone{}, nBool(true), nBool(false), nNone{}, nBool(true)}, true},
		{"strings", nList{nKey(""), nKey("a"), nStr("héllo ☃"), nStr(strings.Repeat("x", 255)), nStr(strings.Repeat("y", 256)),
			nStr(strings.Repeat("z", 70000)), nStr("after the big one"), nKey("a"), nKey("")}, true},
		{"bytes", nList{nBytes(""), nBytes("abc"), nBytes(strings.Repeat("\x00\xff", 150)), nBytes(strings.Repeat("b", 65536))}, true},
		{"tuples", nList{nTuple{}, nTuple{nInt(1)}, nTuple{nInt(1), nInt(2)}, nTuple{nInt(1), nInt(2), nInt(3)},
			nTuple{nInt(1), nInt(2), nInt(3), nInt(4)}, nTuple{nTuple{}, nTuple{}}, nTuple{nList{nInt(5)}, nStr("xy")}}, true},
		{"shared", nList{nShare{"x", nList{nInt(1), nInt(2)}}, nUse("x"), nDict{nKey("a"), nUse("x"), nKey("b"), nUse("x")},
			nShare{"d", nDict{nKey("k"), nStr("vv")}}, nList{nUse("d"), nUse("x")}}, true},
		{"snapshot-like entries", nDict{nKey("frames"), nShare{"fr", nList{nDict{nKey("name"), nStr("forward"),
			nKey("filename"), nStr("/w/train.py"), nKey("line"), nInt(22)}}}, nKey("device_traces"), nListOf{entries}}, true},
		{"200k strings (many frames)", nStrs{0, 200000}, true},
		{"single item spanning frames, length declared", nListOf{nStrs{0, 30000}}, true},
		{"single item spanning frames", nList{nStrs{0, 30000}}, false},
		{"single pair spanning frames", nDict{nKey("k"), nStrs{0, 30000}}, false},
		{"short tuple spanning frames", nTuple{nStrs{0, 30000}, nInt(7)}, false},
	}
}

// pyCheck evaluates each case in CPython and reports, per case, whether
// pickle.loads (C) and pickle._loads (pure Python, which checks frames) give an
// object equal to it, what pickle.dumps(obj, 4) is, and what is wrong with the
// framing of the Go output, if anything.
const pyCheck = `
import json, pickle, pickletools, struct, sys, io
_keys = {}
def _key(s): return _keys.setdefault(s, s)
def _new(s): return ''.join(list(s))
def frame_errors(b):
    # Frames follow each other; an opcode is inside one frame or outside all;
    # outside frames are only PROTO, strings or bytes of 64 KiB or more, and
    # under 4 bytes of opcodes after such a string or at the end (CPython
    # gives no FRAME to so little); every frame but one that ends before a big
    # string or the file is 64 KiB or more.
    ops = list(pickletools.genops(b))
    ends = [pos for _, _, pos in ops[1:]] + [len(b)]
    frame_end = None
    loose = 0
    for i, ((op, arg, pos), end) in enumerate(zip(ops, ends)):
        if frame_end is not None and pos == frame_end:
            frame_end = None
        if op.name == 'FRAME':
            if frame_end is not None: return 'FRAME at %d inside a frame' % pos
            if i + 1 < len(ops) and ops[i+1][0].name != 'FRAME' and pos + 9 + arg < len(b):
                nxt = [p for _, _, p in ops if p == pos + 9 + arg]
                if not nxt: return 'frame at %d ends inside an opcode' % pos
                follow = [o for o, _, p in ops if p == pos + 9 + arg][0]
                if follow.name == 'FRAME' and arg < 65536: return 'frame at %d holds %d bytes' % (pos, arg)
            frame_end = pos + 9 + arg
            loose = 0
            continue
        if frame_end is not None:
            if end > frame_end: return '%s at %d straddles the frame ending at %d' % (op.name, pos, frame_end)
            continue
        if op.name == 'PROTO': continue
        if op.name in ('BINUNICODE', 'BINUNICODE8', 'BINBYTES', 'BINBYTES8') and len(arg) >= 65536:
            loose = 0
            continue
        loose += end - pos
        if loose >= 4: return '%d bytes of opcodes outside frames at %d' % (loose, pos)
    pickletools.dis(b, out=io.StringIO())
    return ''
out = {}
for line in sys.stdin:
    c = json.loads(line)
    _keys.clear()
    obj = eval(c['expr'])
    b = bytes.fromhex(c['go'])
    r = {'dumps': pickle.dumps(obj, protocol=4).hex()}
    want = pickle.dumps(obj, protocol=4)
    for name, load in (('c', pickle.loads), ('py', pickle._loads)):
        try:
            got = load(b)
            r[name] = pickle.dumps(got, protocol=4) == want and repr(got) == repr(obj)
        except Exception as e:
            r[name] = repr(e)
    try:
        r['frames'] = frame_errors(b)
    except Exception as e:
        r['frames'] = repr(e)
    out[c['name']] = r
json.dump(out, sys.stdout)
`

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		reftool.Missing(t, "python3 not found")
	}
	return p
}

func TestWriterMatchesCPython(t *testing.T) {
	py := python(t)
	cases := writerCases()
	var in bytes.Buffer
	got := map[string][]byte{}
	for _, c := range cases {
		b := encode(t, c.v)
		got[c.name] = b
		line, _ := json.Marshal(map[string]string{"name": c.name, "expr": pyExpr(c.v), "go": hex.EncodeToString(b)})
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "-c", pyCheck)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var res map[string]struct {
		Dumps  string
		C, Py  any
		Frames string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		r, ok := res[c.name]
		if !ok {
			t.Errorf("%s: no answer from python", c.name)
			continue
		}
		if r.C != true || r.Py != true {
			t.Errorf("%s: python loads it as something else: pickle.loads %v, pickle._loads %v", c.name, r.C, r.Py)
		}
		if r.Frames != "" {
			t.Errorf("%s: framing: %s", c.name, r.Frames)
		}
		want, _ := hex.DecodeString(r.Dumps)
		b := got[c.name]
		if c.same && !bytes.Equal(b, want) {
			i := 0
			for i < len(b) && i < len(want) && b[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d bytes differ from CPython's %d at byte %d:\n go %q\n py %q", c.name, len(b), len(want), i,
				b[max(0, i-16):min(len(b), i+16)], want[max(0, i-16):min(len(want), i+16)])
		}
		if !c.same && bytes.Equal(b, want) {
			t.Logf("%s: now identical to CPython's output", c.name)
		}
		// The Go decoder reads what CPython wrote and what the Writer wrote alike.
		gv, err := pickle.Decode(b, pickle.DefaultLimits)
		if err != nil {
			t.Errorf("%s: Decode: %v", c.name, err)
			continue
		}
		pv, err := pickle.Decode(want, pickle.DefaultLimits)
		if err != nil {
			t.Fatalf("%s: Decode of CPython's pickle: %v", c.name, err)
		}
		if g, p := canon(gv), canon(pv); g != p {
			t.Errorf("%s: Decode gives %.200s, from CPython's pickle %.200s", c.name, g, p)
		}
	}
}

// canon writes a decoded value out in full, dicts in insertion order, floats by bits.
func canon(v pickle.Value) string {
	var b strings.Builder
	var walk func(v pickle.Value)
	walk = func(v pickle.Value) {
		switch v.Kind {
		case pickle.None:
			b.WriteString("N")
		case pickle.Bool, pickle.Int:
			fmt.Fprintf(&b, "%v:%d", v.Kind, v.Num)
		case pickle.BigInt:
			fmt.Fprintf(&b, "big:%v", v.Ref)
		case pickle.Float:
			fmt.Fprintf(&b, "f:%x", uint64(v.Num))
		case pickle.Str, pickle.Bytes:
			fmt.Fprintf(&b, "%v:%q", v.Kind, v.Text)
		case pickle.DictKind:
			b.WriteString("{")
			for _, it := range v.Ref.(*pickle.Dict).Items {
				walk(it)
				b.WriteString(",")
			}
			b.WriteString("}")
		default:
			items, _ := v.Items()
			fmt.Fprintf(&b, "%v[", v.Kind)
			for _, it := range items {
				walk(it)
				b.WriteString(",")
			}
			b.WriteString("]")
		}
	}
	walk(v)
	return b.String()
}

// Value writes back what Decode read: for CPython's own pickles of plain data
// (sharing included), the same bytes.
func TestWriterValueRoundTrip(t *testing.T) {
	py := python(t)
	script := `
import pickle, sys
_keys = {}
x = [1, 'shared']
d = {'a': x, 'b': [x, x], 'c': {'deep': [(1, 2.5, None), (), (True, False), tuple(range(7))]}}
objs = [d, list(range(-3000, 3000, 7)), {str(i): [i] * (i % 3) for i in range(2500)}, {1, 2, 3},
        [b'\x00' * 300, 'é' * 200, 2**70, -2**70, float('inf')], [[[]]], [{}] * 3]
sys.stdout.buffer.write(pickle.dumps(objs, protocol=4))
`
	cmd := exec.Command(py, "-c", script)
	src, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	v, err := pickle.Decode(src, pickle.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := pickle.NewWriter(&buf)
	w.Value(v)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Strings are not shared by Value (Decode does not keep str identity), so
	// compare what loads, and the bytes only where no string repeats.
	back, err := pickle.Decode(buf.Bytes(), pickle.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if canon(back) != canon(v) {
		t.Errorf("round trip differs:\n%.300s\n%.300s", canon(back), canon(v))
	}
	check := exec.Command(py, "-c", `
import pickle, sys
a = pickle.loads(bytes.fromhex(sys.argv[1])); b = pickle._loads(bytes.fromhex(sys.argv[2]))
assert a == b, 'differs'
assert b[0]['b'][0] is b[0]['a'], 'sharing lost'
print('ok')`, hex.EncodeToString(src), hex.EncodeToString(buf.Bytes()))
	if out, err := check.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("python: %v %s", err, out)
	}
}

// A list of a million entries is streamed through a Writer holding one frame.
func TestWriterStreams(t *testing.T) {
	cw := &countingWriter{}
	w := pickle.NewWriter(cw)
	w.BeginDict()
	w.Key("device_traces")
	w.BeginList()
	w.BeginList()
	fr := w.BeginList()
	w.EndList()
	const n = 1_000_000
	for i := 0; i < n; i++ {
		w.BeginDict()
		w.Key("action")
		w.Key("alloc")
		w.Key("addr")
		w.Uint(uint64(139817224503296 + i*512))
		w.Key("frames")
		w.Get(fr)
		w.EndDict()
		if cw.max > 70<<10 {
			t.Fatalf("a write of %d bytes: frames should be about 64 KiB", cw.max)
		}
	}
	w.EndList()
	w.EndList()
	w.EndDict()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != cw.n || cw.writes < int(cw.n/(70<<10)) {
		t.Errorf("wrote %d bytes in %d writes, Written says %d", cw.n, cw.writes, w.Written())
	}
	if w.Memos() != 1+1+1+1+1+2+1+1+n {
		t.Errorf("%d memo slots", w.Memos())
	}
}

type countingWriter struct {
	n      int64
	writes int
	max    int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	c.writes++
	c.max = max(c.max, len(b))
	return len(b), nil
}

func TestWriterFramesAreChained(t *testing.T) {
	b := encode(t, ints(0, 100000, func(i int64) node { return nInt(i * 1000) }))
	off := 2
	frames := 0
	for off < len(b) {
		if b[off] != 0x95 {
			t.Fatalf("byte %d is %#x, not FRAME", off, b[off])
		}
		n := int(binary.LittleEndian.Uint64(b[off+1:]))
		off += 9 + n
		frames++
		if off < len(b) && (n < 64<<10 || n > 64<<10+16) {
			t.Errorf("frame %d holds %d bytes", frames, n)
		}
	}
	if off != len(b) || b[len(b)-1] != '.' {
		t.Errorf("frames end at %d of %d", off, len(b))
	}
}

func TestWriterMisuse(t *testing.T) {
	for name, f := range map[string]func(w *pickle.Writer){
		"EndList in a dict":   func(w *pickle.Writer) { w.BeginDict(); w.EndList() },
		"key with no value":   func(w *pickle.Writer) { w.BeginDict(); w.Key("a"); w.EndDict() },
		"two top-level":       func(w *pickle.Writer) { w.Int(1); w.Int(2) },
		"Get of nothing":      func(w *pickle.Writer) { w.Get(3) },
		"too many items":      func(w *pickle.Writer) { w.BeginListOf(1); w.Int(1); w.Int(2) },
		"too few items":       func(w *pickle.Writer) { w.BeginListOf(2); w.Int(1); w.EndList() },
		"EndTuple with none":  func(w *pickle.Writer) { w.EndTuple() },
		"value after Close":   func(w *pickle.Writer) { w.Int(1); w.Close(); w.Int(2) },
		"Get past the memo":   func(w *pickle.Writer) { w.BeginList(); w.Get(1) },
		"negative Memo value": func(w *pickle.Writer) { w.Get(pickle.NoMemo) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(pickle.NewWriter(io.Discard))
		}()
	}
	w := pickle.NewWriter(io.Discard)
	w.BeginList()
	if err := w.Close(); err == nil {
		t.Error("Close with an open list: no error")
	}
	if err := pickle.NewWriter(io.Discard).Close(); err == nil {
		t.Error("Close of nothing: no error")
	}
	w = pickle.NewWriter(failWriter{})
	w.BeginList()
	for i := 0; i < 100000; i++ {
		w.Int(int64(i))
	}
	w.EndList()
	if err := w.Close(); err == nil || w.Err() == nil {
		t.Error("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func BenchmarkWriterEntry(b *testing.B) {
	w := pickle.NewWriter(io.Discard)
	w.BeginList()
	fr := w.BeginList()
	w.EndList()
	keys := make([]pickle.Memo, 8)
	for i, k := range []string{"action", "alloc", "addr", "size", "stream", "time_us", "compile_context", "frames"} {
		keys[i] = w.Str(k)
	}
	b.SetBytes(88)
	for i := 0; i < b.N; i++ {
		w.BeginDict()
		w.Get(keys[0])
		w.Get(keys[1])
		w.Get(keys[2])
		w.Uint(uint64(139817224503296 + i*512))
		w.Get(keys[3])
		w.Int(int64(i & 0xffffff))
		w.Get(keys[4])
		w.Int(0)
		w.Get(keys[5])
		w.Int(1795939393820855 + int64(i))
		w.Get(keys[6])
		w.Str("N/A")
		w.Get(keys[7])
		w.Get(fr)
		w.EndDict()
	}
	w.EndList()
	w.Close()
}
