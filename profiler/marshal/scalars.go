package marshal

// Numbers and strings: the scalars of marshal, each read into its destination.

import (
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// fixed reads 8 bytes, little-endian, as an int64 or a float's bits.
func (d *Decoder) fixed(at int, what string, kind pickle.Kind, dst *pickle.Value) error {
	if err := d.need(at, 8, what); err != nil {
		return err
	}
	d.pos += 8
	*dst = pickle.Value{Kind: kind, Num: int64(binary.LittleEndian.Uint64(d.buf[d.pos-8:]))}
	return nil
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
