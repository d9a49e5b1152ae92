package pickle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"sort"
	"strconv"
	"testing"
)

// canon computes a digest of a decoded value that Python computes the same way
// (pyCanon below): a Merkle hash in which scalars are written inline and every
// container is replaced by the SHA-256 of its own encoding. Containers are
// hashed once per identity, so a snapshot's shared frame lists cost nothing
// extra, yet the digest covers every value of the fully expanded tree. A
// container met again while it is being hashed (a cycle) is written as 'C'.
//
// Encoding: None N; bools T/F; ints I<decimal>; ; floats D<16 hex digits of
// the IEEE bits>; str S<len>:<utf-8>; bytes and bytearray B<len>:<bytes>;
// containers H<32-byte digest> of U (tuple), L (list), M (dict: keys
// deduplicated as Python does, first position, last value) or E (set and
// frozenset: members' encodings sorted), each followed by <count>:.
type canon struct {
	done   map[any][32]byte
	onPath map[any]bool
	lists  int  // distinct lists
	dicts  int  // distinct dicts
	cyclic bool // a container was met inside itself
}

func newCanon() *canon {
	return &canon{done: map[any][32]byte{}, onPath: map[any]bool{}}
}

// digest is the hex digest of v; afterwards c counts what it met.
func (c *canon) digest(v Value) string {
	sum := sha256.Sum256(c.enc(nil, v))
	return hex.EncodeToString(sum[:])
}

// digestOf is the hex digest of v.
func digestOf(v Value) string { return newCanon().digest(v) }

// identity returns a key naming a container object, or nil for empty tuples
// (Python shares one empty tuple; Go has no identity for it).
func identity(v Value) any {
	switch v.Kind {
	case Tuple:
		t := v.Ref.([]Value)
		if len(t) == 0 {
			return nil
		}
		return &t[0]
	case ListKind, DictKind, SetKind:
		return v.Ref
	}
	return nil
}

func (c *canon) enc(out []byte, v Value) []byte {
	switch v.Kind {
	case None:
		return append(out, 'N')
	case Bool:
		if v.Num != 0 {
			return append(out, 'T')
		}
		return append(out, 'F')
	case Int:
		out = append(out, 'I')
		out = strconv.AppendInt(out, v.Num, 10)
		return append(out, ';')
	case BigInt:
		out = append(out, 'I')
		out = append(out, v.Ref.(*big.Int).String()...)
		return append(out, ';')
	case Float:
		out = append(out, 'D')
		var b [8]byte
		bits := uint64(v.Num)
		for i := 0; i < 8; i++ {
			b[i] = byte(bits >> (56 - 8*i))
		}
		return hex.AppendEncode(out, b[:])
	case Str, Bytes:
		if v.Kind == Str {
			out = append(out, 'S')
		} else {
			out = append(out, 'B')
		}
		out = strconv.AppendInt(out, int64(len(v.Text)), 10)
		out = append(out, ':')
		return append(out, v.Text...)
	}
	id := identity(v)
	if id != nil {
		if c.onPath[id] {
			c.cyclic = true
			return append(out, 'C')
		}
		if d, ok := c.done[id]; ok {
			return append(append(out, 'H'), d[:]...)
		}
		c.onPath[id] = true
		defer delete(c.onPath, id)
		switch v.Kind {
		case ListKind:
			c.lists++
		case DictKind:
			c.dicts++
		}
	}
	var body []byte
	switch v.Kind {
	case Tuple, ListKind:
		items, _ := v.Items()
		tag := byte('U')
		if v.Kind == ListKind {
			tag = 'L'
		}
		body = append(body, tag)
		body = strconv.AppendInt(body, int64(len(items)), 10)
		body = append(body, ':')
		for _, it := range items {
			body = c.enc(body, it)
		}
	case SetKind:
		items, _ := v.Items()
		encs := make([][]byte, len(items))
		for i, it := range items {
			encs[i] = c.enc(nil, it)
		}
		sort.Slice(encs, func(i, j int) bool { return bytes.Compare(encs[i], encs[j]) < 0 })
		body = append(body, 'E')
		body = strconv.AppendInt(body, int64(len(items)), 10)
		body = append(body, ':')
		for _, e := range encs {
			body = append(body, e...)
		}
	case DictKind:
		d := v.Ref.(*Dict)
		type entry struct{ key, val []byte }
		var order []string
		entries := map[string]*entry{}
		for i := 0; i+1 < len(d.Items); i += 2 {
			k := c.enc(nil, d.Items[i])
			val := c.enc(nil, d.Items[i+1])
			if e, ok := entries[string(k)]; ok {
				e.val = val
				continue
			}
			order = append(order, string(k))
			entries[string(k)] = &entry{k, val}
		}
		body = append(body, 'M')
		body = strconv.AppendInt(body, int64(len(order)), 10)
		body = append(body, ':')
		for _, k := range order {
			body = append(body, entries[k].key...)
			body = append(body, entries[k].val...)
		}
	default:
		body = append(body, '?')
		body = strconv.AppendInt(body, int64(v.Kind), 10)
	}
	sum := sha256.Sum256(body)
	if id != nil {
		c.done[id] = sum
	}
	return append(append(out, 'H'), sum[:]...)
}

// pyCanon prints, for each pickle named on the command line, a line
// "path<TAB>digest<TAB>lists<TAB>dicts", or "path<TAB>ERROR<TAB>message" when
// CPython cannot load it. Python's own dicts hold no duplicate keys, so they
// need no deduplication here.
const pyCanon = `
import hashlib, pickle, struct, sys
sys.setrecursionlimit(100000)

def digest(root):
    done, on_path, counts = {}, set(), [0, 0]
    def enc(o, out):
        t = type(o)
        if o is None:
            out += b'N'
        elif t is bool:
            out += b'T' if o else b'F'
        elif t is int:
            out += b'I%d;' % o
        elif t is float:
            out += b'D' + struct.pack('>d', o).hex().encode()
        elif t is str:
            b = o.encode('utf-8', 'surrogatepass')
            out += b'S%d:' % len(b)
            out += b
        elif t is bytes or t is bytearray:
            out += b'B%d:' % len(o)
            out += o
        else:
            key = id(o) if (t is not tuple or len(o)) else None
            if key is not None:
                if key in on_path:
                    out += b'C'
                    return
                if key in done:
                    out += b'H' + done[key]
                    return
                on_path.add(key)
                if t is list:
                    counts[0] += 1
                elif t is dict:
                    counts[1] += 1
            body = bytearray()
            if t is tuple or t is list:
                body += (b'U' if t is tuple else b'L') + b'%d:' % len(o)
                for x in o:
                    enc(x, body)
            elif t is set or t is frozenset:
                encs = []
                for x in o:
                    e = bytearray()
                    enc(x, e)
                    encs.append(bytes(e))
                body += b'E%d:' % len(o)
                for e in sorted(encs):
                    body += e
            elif t is dict:
                body += b'M%d:' % len(o)
                for k, v in o.items():
                    enc(k, body)
                    enc(v, body)
            else:
                raise TypeError('unexpected type %s' % t.__name__)
            d = hashlib.sha256(body).digest()
            if key is not None:
                done[key] = d
                on_path.discard(key)
            out += b'H' + d
    out = bytearray()
    enc(root, out)
    return hashlib.sha256(out).hexdigest(), counts[0], counts[1]

for path in sys.argv[1:]:
    try:
        with open(path, 'rb') as f:
            obj = pickle.load(f)
        h, lists, dicts = digest(obj)
        print('%s\t%s\t%d\t%d' % (path, h, lists, dicts), flush=True)
    except Exception as e:
        print('%s\tERROR\t%s: %s' % (path, type(e).__name__, str(e).replace('\n', ' ')), flush=True)
`

// TestCanonDistinguishes checks the digest the cross-check relies on: values
// Python tells apart get different digests, and only set order is ignored.
func TestCanonDistinguishes(t *testing.T) {
	dec := func(s string) string {
		t.Helper()
		v, err := Decode([]byte(s), DefaultLimits)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return digestOf(v)
	}
	differ := [][2]string{
		{"\x80\x02](K\x01K\x02e.", "\x80\x02(K\x01K\x02t."},                                          // list vs tuple
		{"\x80\x02G\x00\x00\x00\x00\x00\x00\x00\x00.", "\x80\x02G\x80\x00\x00\x00\x00\x00\x00\x00."}, // 0.0 vs -0.0
		{"\x80\x03U\x01a.", "\x80\x03C\x01a."},                                                       // str vs bytes
		{"\x80\x02K\x01.", "\x80\x02\x88."},                                                          // 1 vs True
		{"\x80\x02K\x01.", "\x80\x02G?\xf0\x00\x00\x00\x00\x00\x00."},                                // 1 vs 1.0
		{"\x80\x02}(U\x01aK\x01u.", "\x80\x02}(U\x01aK\x02u."},                                       // dict values
		{"\x80\x02}(U\x01aK\x01U\x01bK\x01u.", "\x80\x02}(U\x01bK\x01U\x01aK\x01u."},                 // dict order
		{"\x80\x02](K\x01K\x02e.", "\x80\x02](K\x02K\x01e."},                                         // list order
	}
	for i, c := range differ {
		if dec(c[0]) == dec(c[1]) {
			t.Errorf("case %d: %q and %q have the same digest", i, c[0], c[1])
		}
	}
	same := [][2]string{
		{"\x80\x04\x8f(K\x01K\x02\x90.", "\x80\x04\x8f(K\x02K\x01\x90."},  // set order
		{"\x80\x02}(U\x01aK\x01U\x01aK\x02u.", "\x80\x02}(U\x01aK\x02u."}, // later duplicate key wins
		{"\x80\x02](K\x01e](K\x01e\x86.", "\x80\x02](K\x01e2\x86."},       // sharing is not part of the value
	}
	for i, c := range same {
		if dec(c[0]) != dec(c[1]) {
			t.Errorf("case %d: %q and %q have different digests", i, c[0], c[1])
		}
	}
}
