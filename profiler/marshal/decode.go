package marshal

import (
	"encoding/binary"
	"fmt"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// Error is a refused or truncated input, at a byte offset in the stream.
type Error struct {
	Offset int64
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Msg) }

// Limits bound what a stream may make the reader hold.
type Limits struct {
	MaxDepth   int   // nesting of containers, counting what references expand to
	MaxPayload int64 // bytes in one VSM frame's payload
}

// DefaultLimits: CPython's own nesting limit (MAX_MARSHAL_STACK_DEPTH, so
// whatever Python writes is read), and 1 GiB per frame.
var DefaultLimits = Limits{MaxDepth: 2000, MaxPayload: 1 << 30}

const flagRef = 0x80

// Interning: strings up to internMax bytes are kept in a table shared by all
// payloads, at most internCap of them.
const (
	internMax = 128
	internCap = 1 << 16
)

// Decoder decodes marshal payloads one after another. Short strings are shared
// across payloads, so each chunk's "action" keys and action names are the same
// Go strings (comparable by pointer, as torchsnap's caches do) and cost no
// allocation.
type Decoder struct {
	lim   Limits
	buf   []byte
	pos   int
	base  int64
	depth int // containers open
	deep  int // the deepest level reached inside the innermost open container
	refs  []slot
	stack []pickle.Value // items of the containers being read
	strs  map[string]string
	// unhashable holds the tuples (by their first item) that contain a list,
	// dict or set; they may not be dict keys or set items.
	unhashable map[*pickle.Value]bool
	// DecodeEntries (arenas): lend is set inside an entry, outside any
	// container a reference can reach; lent is the storage lent to the
	// entry, kept the payload's.
	arenas   bool
	lend     bool
	lent     lending
	kept     lending
	lists    map[string]slot // lists of references, by their bytes (sameList)
	flatKeys []string        // the entry's string keys and their values
	flatVals []pickle.Value
	keyMemo  [32]keyMemo // pairsFlat's keys by position
	strMemo  [32]string  // pairsFlat's short ASCII strings by position
}

// slot is a reference table entry: a FLAG_REF object, its height (nesting
// below it), whether it is complete, was referred to again, or was a dict
// lent to DecodeEntries' caller (and reused since).
type slot struct {
	v      pickle.Value
	height int
	done   bool
	used   bool
	lent   bool
}

// NewDecoder returns a Decoder with the given limits (zero fields: the
// defaults).
func NewDecoder(lim Limits) *Decoder {
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	if lim.MaxPayload <= 0 {
		lim.MaxPayload = DefaultLimits.MaxPayload
	}
	return &Decoder{lim: lim, strs: map[string]string{}}
}

// Unmarshal decodes one marshal value that fills b.
func Unmarshal(b []byte) (pickle.Value, error) {
	return NewDecoder(DefaultLimits).Decode(b, 0)
}

// Decode decodes the one marshal value that fills b; base is b's offset in the
// stream, for errors. The value keeps no reference to b.
func (d *Decoder) Decode(b []byte, base int64) (pickle.Value, error) {
	d.reset(b, base)
	v, err := d.value()
	if err == nil {
		err = d.end()
	}
	d.buf = nil
	if err != nil {
		return pickle.Value{}, err
	}
	return v, nil
}

func (d *Decoder) reset(b []byte, base int64) {
	clear(d.refs)
	d.buf, d.pos, d.base, d.depth, d.deep, d.refs = b, 0, base, 0, 0, d.refs[:0]
	clear(d.unhashable)
	clear(d.lists)
}

// end checks that the value filled the payload.
func (d *Decoder) end() error {
	if d.pos != len(d.buf) {
		return d.fail(d.pos, "%d bytes after the marshal value", len(d.buf)-d.pos)
	}
	return nil
}

// Shared returns the objects of the last payload that were referred to more
// than once (each appears in it as one object several times): strings,
// tuples, lists, dicts and sets, not numbers.
func (d *Decoder) Shared() []pickle.Value {
	var out []pickle.Value
	for _, s := range d.refs {
		if s.used && s.done && s.v.Kind >= pickle.Str {
			out = append(out, s.v)
		}
	}
	return out
}

func (d *Decoder) fail(at int, format string, args ...any) error {
	return &Error{Offset: d.base + int64(at), Msg: "marshal: " + fmt.Sprintf(format, args...)}
}

// need checks that n more bytes are left, before anything of that size is
// allocated.
func (d *Decoder) need(at, n int, what string) error {
	if n < 0 || n > len(d.buf)-d.pos {
		return d.fail(at, "%s of %d bytes, only %d left in the payload", what, n, len(d.buf)-d.pos)
	}
	return nil
}

func (d *Decoder) u8(at int, what string) (int, error) {
	if err := d.need(at, 1, what); err != nil {
		return 0, err
	}
	d.pos++
	return int(d.buf[d.pos-1]), nil
}

func (d *Decoder) i32(at int, what string) (int32, error) {
	if err := d.need(at, 4, what); err != nil {
		return 0, err
	}
	d.pos += 4
	return int32(binary.LittleEndian.Uint32(d.buf[d.pos-4:])), nil
}

// count reads a 4-byte size (a 1-byte one when short) and checks that the
// payload has at least a byte per item left.
func (d *Decoder) count(at int, short bool, what string) (int, error) {
	var n int
	switch {
	case short && d.pos < len(d.buf):
		n = int(d.buf[d.pos])
		d.pos++
	case !short && d.pos+4 <= len(d.buf):
		n = int(int32(binary.LittleEndian.Uint32(d.buf[d.pos:])))
		d.pos += 4
	default:
		return 0, d.fail(at, "the payload ends inside the size of a %s", what)
	}
	if n < 0 || n > len(d.buf)-d.pos {
		return 0, d.fail(at, "%s of size %d, only %d bytes left in the payload", what, n, len(d.buf)-d.pos)
	}
	return n, nil
}

// value decodes the next object.
func (d *Decoder) value() (pickle.Value, error) {
	var v pickle.Value
	err := d.read(&v)
	return v, err
}

// read decodes the next object into *dst, which must not be in the stack (a
// container read may move the stack).
func (d *Decoder) read(dst *pickle.Value) error {
	at := d.pos
	if s := d.refAt(at); s != nil {
		*dst = s.v // the commonest code: every repeated key, stack and frame
		return nil
	}
	if at >= len(d.buf) {
		return d.fail(at, "the payload ends where a value should start")
	}
	code := d.buf[at]
	d.pos++
	var err error
	switch code &^ flagRef {
	case 'N':
		*dst = pickle.Value{Kind: pickle.None}
		return nil
	case 'T', 'F':
		// CPython ignores FLAG_REF on the singletons: they take no slot.
		*dst = pickle.Value{Kind: pickle.Bool, Num: int64(b2i(code&^flagRef == 'T'))}
		return nil
	case 'r':
		*dst, err = d.ref(at)
		return err
	case '0':
		return d.fail(at, "a NULL ('0') outside a dict")
	case 'i':
		var n int32
		n, err = d.i32(at, "int")
		*dst = pickle.Value{Kind: pickle.Int, Num: int64(n)}
	case 'I':
		err = d.fixed(at, "int64", pickle.Int, dst)
	case 'l':
		err = d.long(at, dst)
	case 'g':
		err = d.fixed(at, "float", pickle.Float, dst)
	case 'f':
		err = d.textFloat(at, dst)
	case 's':
		err = d.bytes(at, dst)
	case 'u', 't', 'a', 'A', 'z', 'Z':
		err = d.str(at, code&^flagRef, dst)
	case '(', ')', '[', '{', '<', '>':
		*dst, err = d.container(at, code&^flagRef, code&flagRef != 0)
		return err
	default:
		return d.fail(at, "%s", refusal(code&^flagRef))
	}
	if err == nil && code&flagRef != 0 {
		d.refs = append(d.refs, slot{v: *dst, done: true})
	}
	return err
}

// refAt is value's fast path for a reference at p (nil: take the slow one).
func (d *Decoder) refAt(p int) *slot {
	b := d.buf
	if p+5 > len(b) || b[p] != 'r' {
		return nil
	}
	n := binary.LittleEndian.Uint32(b[p+1:])
	if uint64(n) >= uint64(len(d.refs)) {
		return nil
	}
	s := &d.refs[n]
	if !s.done || s.lent || d.depth+s.height > d.lim.MaxDepth {
		return nil
	}
	s.used = true
	d.pos = p + 5
	d.deep = max(d.deep, d.depth+s.height)
	return s
}

func refusal(c byte) string {
	switch c {
	case 'c':
		return "a code object ('c'): refused, only plain data is read"
	case 'S':
		return "StopIteration ('S'): refused, only plain data is read"
	case '.':
		return "Ellipsis ('.'): refused, only plain data is read"
	case 'x', 'y':
		return fmt.Sprintf("a complex number (%q): refused, only plain data is read", c)
	case ':':
		return "a slice (':', marshal version 5): refused, only plain data is read"
	}
	return fmt.Sprintf("unknown type code 0x%02x", c)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *Decoder) ref(at int) (pickle.Value, error) {
	n, err := d.i32(at, "reference")
	if err != nil {
		return pickle.Value{}, err
	}
	if n < 0 || int(n) >= len(d.refs) {
		return pickle.Value{}, d.fail(at, "reference %d with %d objects in the table", n, len(d.refs))
	}
	s := &d.refs[n]
	if s.lent {
		return pickle.Value{}, errLent
	}
	if !s.done {
		return pickle.Value{}, d.fail(at, "reference %d to a %s still being read (a cycle)", n, s.v.TypeName())
	}
	if d.depth+s.height > d.lim.MaxDepth {
		return pickle.Value{}, d.fail(at, "reference %d nests deeper than %d", n, d.lim.MaxDepth)
	}
	s.used = true
	d.deep = max(d.deep, d.depth+s.height)
	return s.v, nil
}
