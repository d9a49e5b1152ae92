package marshal

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

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
	// DecodeList: lend is set inside an entry, outside any container a
	// reference can reach, and store is the current batch's storage.
	lend    bool
	store   *lending
	batches chan *batch
	lists   map[string]slot // lent lists of references, by their bytes (sameList)
}

// slot is a reference table entry: a FLAG_REF object, its height (nesting
// below it), whether it is complete, was referred to again, or was a dict
// lent to DecodeList's caller (and reused since).
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

// fixed reads 8 bytes, little-endian, as an int64 or a float's bits.
func (d *Decoder) fixed(at int, what string, kind pickle.Kind, dst *pickle.Value) error {
	if err := d.need(at, 8, what); err != nil {
		return err
	}
	d.pos += 8
	*dst = pickle.Value{Kind: kind, Num: int64(binary.LittleEndian.Uint64(d.buf[d.pos-8:]))}
	return nil
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

// long reads a PyLong: a signed digit count, then 15-bit digits, least
// significant first.
func (d *Decoder) long(at int, dst *pickle.Value) error {
	m, err := d.i32(at, "long")
	if err != nil {
		return err
	}
	n := int(m)
	if n < 0 {
		n = -n
	}
	if n > (len(d.buf)-d.pos)/2 {
		return d.fail(at, "long of %d digits, only %d bytes left in the payload", n, len(d.buf)-d.pos)
	}
	digits := d.buf[d.pos : d.pos+2*n]
	d.pos += 2 * n
	for i := 0; i < n; i++ {
		if binary.LittleEndian.Uint16(digits[2*i:]) >= 1<<15 {
			return d.fail(at, "long digit %d out of range", i)
		}
	}
	if n > 0 && binary.LittleEndian.Uint16(digits[2*n-2:]) == 0 {
		return d.fail(at, "unnormalized long (its top digit is 0)")
	}
	if n <= 4 { // up to 60 bits
		var u int64
		for i := n - 1; i >= 0; i-- {
			u = u<<15 | int64(binary.LittleEndian.Uint16(digits[2*i:]))
		}
		if m < 0 {
			u = -u
		}
		*dst = pickle.Value{Kind: pickle.Int, Num: u}
		return nil
	}
	x := new(big.Int)
	for i := n - 1; i >= 0; i-- {
		x.Lsh(x, 15)
		x.Or(x, big.NewInt(int64(binary.LittleEndian.Uint16(digits[2*i:]))))
	}
	if m < 0 {
		x.Neg(x)
	}
	if x.IsInt64() {
		*dst = pickle.Value{Kind: pickle.Int, Num: x.Int64()}
	} else {
		*dst = pickle.Value{Kind: pickle.BigInt, Ref: x}
	}
	return nil
}

// textFloat reads a float written as text (marshal versions 0 and 1), as
// PyOS_string_to_double would: no hex, no underscores.
func (d *Decoder) textFloat(at int, dst *pickle.Value) error {
	n, err := d.u8(at, "float text size")
	if err == nil {
		err = d.need(at, n, "float text")
	}
	if err != nil {
		return err
	}
	s := string(d.buf[d.pos : d.pos+n])
	d.pos += n
	f, perr := strconv.ParseFloat(s, 64)
	if strings.ContainsAny(s, "xX_") || (perr != nil && !isRange(perr)) {
		return d.fail(at, "float text %q", s)
	}
	*dst = pickle.Value{Kind: pickle.Float, Num: int64(math.Float64bits(f))}
	return nil
}

// isRange: Python reads "1e999" as inf, as ParseFloat does with ErrRange.
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (d *Decoder) bytes(at int, dst *pickle.Value) error {
	n, err := d.count(at, false, "bytes")
	if err != nil {
		return err
	}
	d.pos += n
	*dst = pickle.Value{Kind: pickle.Bytes, Text: string(d.buf[d.pos-n : d.pos])}
	return nil
}

// str reads a str: 'u' and 't' are UTF-8 (surrogates allowed, as CPython's
// "surrogatepass"), the ASCII codes Latin-1 as CPython reads them.
func (d *Decoder) str(at int, code byte, dst *pickle.Value) error {
	n, err := d.count(at, code == 'z' || code == 'Z', "str")
	if err != nil {
		return err
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	switch code {
	case 'u', 't':
		if !utf8.Valid(b) && !validSurrogatePass(b) {
			return d.fail(at, "str is not UTF-8")
		}
	default:
		if s, ok := latin1(b); ok {
			*dst = pickle.Value{Kind: pickle.Str, Text: s}
			return nil
		}
	}
	*dst = pickle.Value{Kind: pickle.Str, Text: d.intern(b)}
	return nil
}

func (d *Decoder) intern(b []byte) string {
	if len(b) > internMax {
		return string(b)
	}
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.strs) < internCap {
		d.strs[s] = s
	}
	return s
}

// latin1 converts an "ASCII" string holding bytes >= 0x80 (CPython reads them
// as Latin-1); ok is false for plain ASCII.
func latin1(b []byte) (string, bool) {
	for i, c := range b {
		if c >= 0x80 {
			r := make([]rune, 0, len(b))
			for _, c := range b[i:] {
				r = append(r, rune(c))
			}
			return string(b[:i]) + string(r), true
		}
	}
	return "", false
}

// validSurrogatePass reports whether b is UTF-8 in which UTF-16 surrogates
// (U+D800..U+DFFF, as ED A0..BF xx) may appear, as Python's "surrogatepass".
func validSurrogatePass(b []byte) bool {
	for len(b) > 0 {
		if len(b) >= 3 && b[0] == 0xed && b[1] >= 0xa0 && b[1] <= 0xbf && b[2] >= 0x80 && b[2] <= 0xbf {
			b = b[3:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		b = b[n:]
	}
	return true
}
