package marshal

import (
	"encoding/binary"
	"errors"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// EntryFunc receives one item of a list streamed by DecodeEntries. A dict
// item is not built: item is a DictKind Value without Ref, and keys and vals
// hold its pairs whose keys are strings, in order (pairs with other keys are
// read and checked, then left out). Any other item is item itself, with no
// keys or vals.
//
// Only strings and numbers may be kept. Keys and vals, and the lists and dicts
// among the values that nothing else can refer to (no FLAG_REF on them or
// around them), are lent: they are refilled once the call returns; the other
// lists and dicts once DecodeEntries returns. A list among the values may be
// the same *List in several calls (a list read from the same references, or
// referred to again): the callee must not change it, except to cache in Mark
// what depends only on its items.
type EntryFunc func(item pickle.Value, keys []string, vals []pickle.Value) error

// DecodeEntries decodes a payload that holds one list, handing its items to
// each in order without building the list or its dicts: trace entries are
// read straight from the bytes, references and small ints inline, into
// storage reused entry after entry. It runs on the caller's goroutine; each's
// error stops it and is returned as is.
//
// Python marks every entry as a possible reference target (the chunk is a
// slice, so each entry has two owners), but no entry is referred to again. If
// one is, the payload is decoded again whole and each receives the remaining
// items from that tree.
func (d *Decoder) DecodeEntries(b []byte, base int64, each EntryFunc) error {
	n, err := d.entries(b, base, each)
	if err != errLent {
		return err
	}
	// Decode the payload whole and hand out what is left from the tree.
	v, err := d.Decode(b, base)
	if err != nil {
		return err
	}
	for _, it := range v.Ref.(*pickle.List).Items[n:] {
		var keys []string
		var vals []pickle.Value
		if it.Kind == pickle.DictKind {
			m := it.Ref.(*pickle.Dict)
			for i := 0; i+1 < len(m.Items); i += 2 {
				if m.Items[i].Kind == pickle.Str {
					keys, vals = append(keys, m.Items[i].Text), append(vals, m.Items[i+1])
				}
			}
			it = pickle.Value{Kind: pickle.DictKind}
		}
		if err := each(it, keys, vals); err != nil {
			return err
		}
	}
	return nil
}

// errLent: a reference to a dict lent out earlier.
var errLent = errors.New("marshal: reference to a lent dict")

// entries is DecodeEntries' single pass; it returns how many items it handed
// out.
func (d *Decoder) entries(b []byte, base int64, each EntryFunc) (int, error) {
	d.reset(b, base)
	for i := range d.keyMemo {
		d.keyMemo[i] = keyMemo{bits: noKey} // references restart in every payload
	}
	d.kept.reset()
	d.arenas = true
	defer func() { d.buf, d.arenas = nil, false }()
	if len(b) == 0 || b[0]&^flagRef != '[' {
		return 0, d.fail(0, "the payload is not a list")
	}
	d.pos = 1
	if b[0]&flagRef != 0 {
		d.refs = append(d.refs, slot{v: pickle.Value{Kind: pickle.ListKind}}) // never done: a reference to it is a cycle
	}
	n, err := d.count(0, false, "list")
	if err != nil {
		return 0, err
	}
	d.depth = 1
	for i := 0; i < n; i++ {
		d.lent.reset()
		if at := d.pos; at < len(b) && b[at]&^flagRef == '{' {
			var k int
			if k, err = d.entry(at); err == nil {
				err = each(pickle.Value{Kind: pickle.DictKind}, d.flatKeys[:k], d.flatVals[:k])
			}
		} else {
			var v pickle.Value
			if v, err = d.value(); err == nil {
				err = each(v, nil, nil)
			}
		}
		if err != nil {
			return i, err
		}
	}
	return n, d.end()
}

// entry reads the dict at b[at] into the first n of d.flatKeys and
// d.flatVals.
func (d *Decoder) entry(at int) (n int, err error) {
	d.pos++
	deep, err := d.open(at)
	if err != nil {
		return 0, err
	}
	idx := -1
	if d.buf[at]&flagRef != 0 {
		idx = len(d.refs)
		d.refs = append(d.refs, slot{v: pickle.Value{Kind: pickle.DictKind}})
	}
	d.lend = true
	n, err = d.pairsFlat(at)
	d.lend = false
	h := d.close(deep)
	if err == nil && idx >= 0 {
		d.refs[idx] = slot{v: pickle.Value{Kind: pickle.DictKind}, height: h, done: true, lent: true}
	}
	return n, err
}

// pairsFlat reads an entry's pairs up to the '0' that ends them. The common
// codes are read inline: keys that are references to strings (a reference
// seen at the same position in the last entry is matched by its bytes),
// values that are references, ints, small longs, short strings, empty lists
// and None; everything else goes through read, which checks it as Decode
// would.
func (d *Decoder) pairsFlat(at int) (int, error) {
	b := d.buf
	p := d.pos // kept here, and in d.pos only around read
	n := 0     // pairs with a string key so far
	var err error
	for i := 0; ; i++ {
		if p >= len(b) {
			err = d.fail(at, "the payload ends inside a dict")
			break
		}
		if b[p]&^flagRef == '0' {
			p++
			break
		}
		var key string
		isStr := true
		m := &d.keyMemo[i%len(d.keyMemo)]
		if p+8 <= len(b) && binary.LittleEndian.Uint64(b[p:])&(1<<40-1) == m.bits {
			key, p = m.s, p+5
		} else if s, r := d.strRef(p); s != nil {
			key, p = s.v.Text, p+5
			*m = keyMemo{bits: 'r' | uint64(r)<<8, s: key}
		} else {
			d.pos = p
			if key, isStr, err = d.key(p); err != nil {
				break
			}
			p = d.pos
		}
		if p < len(b) && b[p]&^flagRef == '0' {
			err = d.fail(p, "a dict key with no value")
			break
		}
		// The value, read in place.
		if n == len(d.flatVals) {
			d.flatKeys = append(d.flatKeys, "")
			d.flatKeys = d.flatKeys[:cap(d.flatKeys)]
			d.flatVals = append(d.flatVals, pickle.Value{})
			d.flatVals = d.flatVals[:cap(d.flatVals)]
		}
		if q := d.quick(p, &d.flatVals[n], i); q > 0 {
			p = q
		} else {
			d.pos = p
			if err = d.read(&d.flatVals[n]); err != nil {
				break
			}
			p = d.pos
		}
		if isStr {
			d.flatKeys[n] = key
			n++
		}
	}
	d.pos = p
	return n, err
}

// keyMemo remembers a key that was a reference to a string: the reference's
// five bytes ('r' and the index; noKey: none) and the string.
type keyMemo struct {
	bits uint64
	s    string
}

const noKey = 1 << 40 // no five bytes read as a uint64

// key reads a dict key at p that is not a reference to a string; isStr
// reports whether it is a string.
func (d *Decoder) key(p int) (key string, isStr bool, err error) {
	k, err := d.value()
	if err != nil {
		return "", false, err
	}
	if k.Kind >= pickle.Tuple && !d.hashable(k) {
		return "", false, d.fail(p, "an unhashable %s as a dict key", k.TypeName())
	}
	return k.Text, k.Kind == pickle.Str, nil
}

// strRef returns the slot of a reference at p to a string, and its index
// (nil: none).
func (d *Decoder) strRef(p int) (*slot, uint32) {
	b := d.buf
	if p+5 > len(b) || b[p] != 'r' {
		return nil, 0
	}
	n := binary.LittleEndian.Uint32(b[p+1:])
	if uint64(n) >= uint64(len(d.refs)) {
		return nil, 0
	}
	s := &d.refs[n]
	if !s.done || s.v.Kind != pickle.Str {
		return nil, 0
	}
	s.used = true
	return s, n
}

// quick decodes the value at p, the value of an entry's pair i, into *v if
// it is one of pairsFlat's common codes, and returns where it ends; 0:
// anything else, or anything read wrongly, is left to read (which then
// reports the error).
func (d *Decoder) quick(p int, v *pickle.Value, i int) int {
	b := d.buf
	if p+5 > len(b) {
		return 0
	}
	c := b[p]
	end := p + 5
	switch c &^ flagRef {
	case 'r':
		n := binary.LittleEndian.Uint32(b[p+1:])
		if c != 'r' || uint64(n) >= uint64(len(d.refs)) {
			return 0
		}
		s := &d.refs[n]
		if !s.done || s.lent || d.depth+s.height > d.lim.MaxDepth {
			return 0
		}
		s.used = true
		d.deep = max(d.deep, d.depth+s.height)
		*v = s.v
		return end
	case 'N':
		*v = pickle.Value{Kind: pickle.None}
		return p + 1 // CPython ignores FLAG_REF on the singletons
	case 'i':
		*v = pickle.Value{Kind: pickle.Int, Num: int64(int32(binary.LittleEndian.Uint32(b[p+1:])))}
	case 'l':
		if end = d.quickLong(p, v); end == 0 {
			return 0
		}
	case 'z', 'Z':
		if end = d.quickStr(p, v, i); end == 0 {
			return 0
		}
	case '[':
		if binary.LittleEndian.Uint32(b[p+1:]) != 0 || d.depth+1 > d.lim.MaxDepth {
			return 0
		}
		// An empty list: a container of height 1, lent unless it can be
		// referred to.
		s := &d.kept
		if c&flagRef == 0 {
			s = d.storage()
		}
		l := s.list()
		*l = pickle.List{}
		*v = pickle.Value{Kind: pickle.ListKind, Ref: l}
		d.deep = max(d.deep, d.depth+1)
		if c&flagRef != 0 {
			d.refs = append(d.refs, slot{v: *v, height: 1, done: true})
		}
		return end
	default:
		return 0
	}
	if c&flagRef != 0 {
		d.refs = append(d.refs, slot{v: *v, done: true})
	}
	return end
}

// quickLong reads a long of 1 to 4 digits (60 bits) at p, its digits
// taken as one word, and returns where it ends (0: read takes it).
func (d *Decoder) quickLong(p int, v *pickle.Value) int {
	b := d.buf
	m := int32(binary.LittleEndian.Uint32(b[p+1:]))
	n := uint(m)
	if m < 0 {
		n = uint(-m)
	}
	if n-1 >= 4 || p+13 > len(b) {
		return 0 // read takes the rest (and the last few bytes)
	}
	w := binary.LittleEndian.Uint64(b[p+5:])
	w &= 1<<(16*n) - 1 // n=4: the shift is 64, the mask all ones
	if w&0x8000_8000_8000_8000 != 0 || w>>(16*(n-1)) == 0 {
		return 0 // a digit out of range, or the top one 0: read says so
	}
	u := int64(w&0x7fff | w>>16&0x7fff<<15 | w>>32&0x7fff<<30 | w>>48&0x7fff<<45)
	if m < 0 {
		u = -u
	}
	*v = pickle.Value{Kind: pickle.Int, Num: u}
	return p + 5 + 2*int(n)
}

// quickStr reads a short ASCII string at p (codes 'z' and 'Z'), and returns
// where it ends (0: read takes it): the same bytes as the last ones at the
// entry's position i are the same string.
func (d *Decoder) quickStr(p int, v *pickle.Value, i int) int {
	b := d.buf
	n := int(b[p+1])
	if p+2+n > len(b) {
		return 0
	}
	raw := b[p+2 : p+2+n]
	memo := &d.strMemo[i%len(d.strMemo)]
	if *memo != string(raw) {
		if !isASCII(raw) {
			return 0 // Latin-1: read converts it
		}
		*memo = d.intern(raw)
	}
	*v = pickle.Value{Kind: pickle.Str, Text: *memo}
	return p + 2 + n
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
