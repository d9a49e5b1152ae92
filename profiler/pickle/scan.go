package pickle

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
)

// Plan is what the first pass learned: how many times each memo slot is read
// back. The decoding pass keeps a memoised object only while reads remain.
type Plan struct {
	reads   []uint8           // reads per slot, saturating at 255 (then never dropped)
	written bitset            // slots written at least once
	sparse  map[uint64]uint32 // reads of slots far beyond the dense range (explicit PUT indices)
	puts    bool              // explicit PUTs: a slot may be written more than once
	Ops     int64             // opcodes in the pickle
	Proto   int               // protocol from the PROTO opcode, 0 if absent
	Slots   int64             // memo slots written
}

const sparseGap = 1 << 16 // an explicit index this far past the dense range goes to the map

func (p *Plan) slot(id uint64) *uint8 {
	if id < uint64(len(p.reads)) {
		if p.sparse != nil {
			if _, ok := p.sparse[id]; ok {
				return nil // written while far off: it stays in the map
			}
		}
		return &p.reads[id]
	}
	return nil
}

// put marks slot id written and reports whether it was new (CPython's memo is a
// dict, so len(memo), which MEMOIZE uses, counts distinct slots).
func (p *Plan) put(id uint64) bool {
	_, far := p.sparse[id]
	if !far && id < uint64(len(p.reads))+sparseGap && id < 2*uint64(p.Slots)+sparseGap {
		for uint64(len(p.reads)) <= id {
			p.reads = append(p.reads, 0)
		}
	} else if !far {
		if p.sparse == nil {
			p.sparse = map[uint64]uint32{}
		}
		p.sparse[id] = 0
	}
	return p.written.add(id)
}

func (p *Plan) read(id uint64) bool {
	if s := p.slot(id); s != nil && p.written.has(id) {
		if *s < 255 {
			*s++
		}
		return true
	}
	if n, ok := p.sparse[id]; ok {
		p.sparse[id] = n + 1
		return true
	}
	return false
}

// Scan reads a whole pickle once, checking every opcode and counting memo reads.
// size is the input's length if known (-1 otherwise); it bounds string lengths.
func Scan(src io.Reader, size int64, lim Limits) (*Plan, error) {
	r := newReader(src, size)
	p := &Plan{}
	memoLen := uint64(0) // len(memo) as CPython's unpickler sees it
	putAt := func(id uint64) error {
		if id != memoLen {
			p.puts = true // (MEMOIZE writes slot memoLen; so may an explicit PUT)
		}
		if int64(id) > lim.MaxMemoIndex || id > 1<<40 {
			return &Error{Offset: r.opAt, Msg: fmt.Sprintf("memo index %d is absurdly large", id)}
		}
		if p.put(id) {
			memoLen++
		}
		p.Slots++
		return nil
	}
	get := func(id uint64) error {
		if !p.read(id) {
			return &Error{Offset: r.opAt, Msg: fmt.Sprintf("memo slot %d is read before it is written", id)}
		}
		return nil
	}
	for {
		// Fast path: the opcodes that make up nearly all of a snapshot, decoded
		// straight from the buffer while it holds a whole opcode.
		if r.end-r.pos >= 10 {
			if n, id, isGet := commonOp(r.buf[r.pos:r.end]); n > 0 {
				r.opAt = r.base + int64(r.pos)
				r.pos += n
				p.Ops++
				switch {
				case isGet && id < uint64(len(p.reads)) && p.sparse == nil && p.written.words[id>>6]&(1<<(id&63)) != 0:
					if p.reads[id] < 255 {
						p.reads[id]++
					}
				case isGet:
					if err := get(id); err != nil {
						return nil, err
					}
				case r.buf[r.pos-n] == opMemoize:
					if err := putAt(memoLen); err != nil {
						return nil, err
					}
				}
				continue
			}
		} else if r.err == nil {
			_ = r.fill(10) // short reads near the end are handled by the slow path
		}
		op, err := r.op()
		if err != nil {
			return nil, err
		}
		p.Ops++
		switch op {
		case opStop:
			return p, nil
		case opMemoize:
			if err := putAt(memoLen); err != nil {
				return nil, err
			}
		case opBinPut:
			id, err := r.u8()
			if err != nil {
				return nil, err
			}
			if err := putAt(uint64(id)); err != nil {
				return nil, err
			}
		case opLongBinPut:
			id, err := r.u32()
			if err != nil {
				return nil, err
			}
			if err := putAt(uint64(id)); err != nil {
				return nil, err
			}
		case opPut:
			id, err := textIndex(r)
			if err != nil {
				return nil, err
			}
			if err := putAt(id); err != nil {
				return nil, err
			}
		case opBinGet:
			id, err := r.u8()
			if err != nil {
				return nil, err
			}
			if err := get(uint64(id)); err != nil {
				return nil, err
			}
		case opLongBinGet:
			id, err := r.u32()
			if err != nil {
				return nil, err
			}
			if err := get(uint64(id)); err != nil {
				return nil, err
			}
		case opGet:
			id, err := textIndex(r)
			if err != nil {
				return nil, err
			}
			if err := get(id); err != nil {
				return nil, err
			}
		case opProto:
			v, err := r.u8()
			if err != nil {
				return nil, err
			}
			if v > 5 {
				return nil, &Error{Offset: r.opAt, Msg: fmt.Sprintf("unsupported pickle protocol %d", v)}
			}
			p.Proto = int(v)
		default:
			if err := skipArg(r, op, lim); err != nil {
				return nil, err
			}
		}
	}
}

func textIndex(r *reader) (uint64, error) {
	b, err := r.line()
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, &Error{Offset: r.opAt, Msg: fmt.Sprintf("bad memo index %q", b)}
	}
	return id, nil
}

// skipArg steps over the argument of any opcode other than the memo ones.
func skipArg(r *reader, op byte, lim Limits) error {
	var err error
	switch op {
	case opMark, opPop, opPopMark, opDup, opNone, opAppend, opAppends, opDict, opEmptyDict,
		opList, opEmptyList, opSetItem, opSetItems, opTuple, opEmptyTuple, opTuple1, opTuple2,
		opTuple3, opNewTrue, opNewFalse, opEmptySet, opAddItems, opFrozenSet:
		return nil
	case opBinInt1:
		_, err = r.bytes(1)
	case opBinInt2:
		_, err = r.bytes(2)
	case opBinInt:
		_, err = r.bytes(4)
	case opBinFloat, opFrame:
		_, err = r.bytes(8)
	case opInt, opLong, opFloat, opString, opUnicode:
		_, err = r.line()
	case opLong1, opShortBinUnicode, opShortBinBytes, opShortBinString:
		var n byte
		if n, err = r.u8(); err == nil {
			err = r.skip(uint64(n), lim.MaxString)
		}
	case opLong4, opBinUnicode, opBinBytes, opBinString:
		var n uint32
		if n, err = r.u32(); err == nil {
			if op == opBinString && int32(n) < 0 {
				return &Error{Offset: r.opAt, Msg: "negative string length"}
			}
			err = r.skip(uint64(n), lim.MaxString)
		}
	case opBinUnicode8, opBinBytes8, opByteArray8:
		var n uint64
		if n, err = r.u64(); err == nil {
			err = r.skip(n, lim.MaxString)
		}
	default:
		if name, ok := refused[op]; ok {
			return &Error{Offset: r.opAt, Msg: fmt.Sprintf("refusing opcode %s: it would import or call code; a snapshot holds only plain data", name)}
		}
		return &Error{Offset: r.opAt, Msg: fmt.Sprintf("not a pickle opcode: 0x%02x", op)}
	}
	return err
}

// wanted reports whether slot id will be read after being written.
func (p *Plan) wanted(id uint64) bool {
	if s := p.slot(id); s != nil {
		return *s > 0
	}
	return p.sparse[id] > 0
}

// consume records one read of slot id and reports whether it was the last.
// Slots read 255 times or more are kept for good.
func (p *Plan) consume(id uint64) bool {
	if s := p.slot(id); s != nil {
		switch *s {
		case 255:
			return false
		case 0:
			return true
		}
		*s--
		return *s == 0
	}
	n := p.sparse[id]
	if n <= 1 {
		delete(p.sparse, id)
		return true
	}
	p.sparse[id] = n - 1
	return false
}

// bitset is a growable set of memo slots with a map for far-off indices.
type bitset struct {
	words []uint64
	far   map[uint64]struct{}
	n     uint64 // adds so far: the dense range grows only in step with them
}

// fill adds every slot below n.
func (b *bitset) fill(n uint64) {
	for uint64(len(b.words))*64 < n {
		b.words = append(b.words, 0)
	}
	for i := uint64(0); i < n/64; i++ {
		b.words[i] = ^uint64(0)
	}
	for id := n / 64 * 64; id < n; id++ {
		b.words[id/64] |= 1 << (id % 64)
	}
}

func (b *bitset) has(id uint64) bool {
	if id < uint64(len(b.words))*64 && b.words[id/64]&(1<<(id%64)) != 0 {
		return true
	}
	_, ok := b.far[id]
	return ok
}

// add inserts id and reports whether it was new.
func (b *bitset) add(id uint64) bool {
	b.n++
	if id < uint64(len(b.words))*64+sparseGap*64 && id < 2*b.n+sparseGap*64 {
		for uint64(len(b.words))*64 <= id {
			b.words = append(b.words, 0)
		}
		w, bit := id/64, uint64(1)<<(id%64)
		isNew := b.words[w]&bit == 0
		b.words[w] |= bit
		return isNew
	}
	if b.far == nil {
		b.far = map[uint64]struct{}{}
	}
	if _, ok := b.far[id]; ok {
		return false
	}
	b.far[id] = struct{}{}
	return true
}

// opSize is the length of the opcodes whose length is fixed, 0 for the rest.
var opSize = func() (t [256]uint8) {
	for _, op := range []byte{opMark, opEmptyDict, opEmptyList, opSetItems, opAppends, opAppend, opSetItem,
		opNewFalse, opNewTrue, opNone, opTuple1, opTuple2, opTuple3, opEmptyTuple} {
		t[op] = 1
	}
	t[opBinInt1], t[opBinInt2], t[opBinInt], t[opBinFloat], t[opFrame] = 2, 3, 5, 9, 9
	return t
}()

// commonOp measures one of the opcodes that make up nearly all of a snapshot
// (b holds at least 10 bytes): its length (0 for any other), and for a memo
// read its slot. Explicit PUTs and the rest take the slow path.
func commonOp(b []byte) (n int, id uint64, isGet bool) {
	switch op := b[0]; {
	case opSize[op] > 0:
		return int(opSize[op]), 0, false
	case op == opMemoize:
		return 1, 0, false
	case op == opBinGet:
		return 2, uint64(b[1]), true
	case op == opLongBinGet:
		return 5, uint64(binary.LittleEndian.Uint32(b[1:5])), true
	case op == opLong1 || op == opShortBinUnicode || op == opShortBinBytes:
		if n := 2 + int(b[1]); n <= len(b) {
			return n, 0, false
		}
	}
	return 0, 0, false
}
