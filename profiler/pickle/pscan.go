package pickle

import (
	"encoding/binary"
	"io"
	"sync"
)

// ScanAt plans a pickle read through an io.ReaderAt. Protocol 4 and 5 pickles
// are cut into frames (the FRAME opcode) that never split an opcode, so when
// every memo write is a MEMOIZE the frames can be scanned on several cores at
// once: reads are counted per slot wherever they occur, and a slot's index is
// the number of MEMOIZEs before it, which the parts add up in order. Anything
// else (explicit PUTs, unframed data, older protocols) is scanned serially.
func ScanAt(src io.ReaderAt, size int64, lim Limits, workers int) (*Plan, error) {
	serial := func() (*Plan, error) {
		return Scan(io.NewSectionReader(src, 0, size), size, lim)
	}
	if workers < 2 {
		return serial()
	}
	cuts, ok := frameCuts(src, size, workers)
	if !ok {
		return serial()
	}
	parts := make([]chunkScan, len(cuts)-1)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil { // not on the caller's goroutine: the serial scan says what is wrong
					parts[i] = chunkScan{fallback: true}
				}
			}()
			parts[i] = scanChunk(src, cuts[i], cuts[i+1], size, lim, i == len(parts)-1)
		}(i)
	}
	wg.Wait()
	p := &Plan{Proto: 4}
	var base uint64
	var reads readTable
	for i := range parts {
		c := &parts[i]
		// A part that stops early (rare forms, frames that do not match opcode
		// boundaries, damage) is left to the serial scan, which accepts what
		// CPython accepts and reports errors at their true offsets.
		if c.fallback || c.err != nil {
			return serial()
		}
		if c.need > int64(base) {
			return nil, &Error{Offset: c.needAt, Msg: "memo slot is read before it is written"}
		}
		base += c.memoizes
		p.Ops += c.ops
		reads.merge(&c.reads)
	}
	var clean bool
	if p.reads, clean = reads.counts(base); !clean {
		return nil, &Error{Offset: size, Msg: "memo slot is read but never written"}
	}
	p.written.fill(base)
	p.Slots = int64(base)
	return p, nil
}

// frameCuts finds frame starts that split the file into about n parts of
// similar size. It walks the chain of FRAME headers (one small read per frame).
func frameCuts(src io.ReaderAt, size int64, n int) ([]int64, bool) {
	var hdr [9]byte
	if _, err := src.ReadAt(hdr[:3], 0); err != nil || hdr[0] != opProto || hdr[1] < 4 || hdr[2] != opFrame {
		return nil, false
	}
	cuts := []int64{0}
	target := size / int64(n)
	off := int64(2)
	for off < size {
		if _, err := src.ReadAt(hdr[:], off); err != nil {
			break // the last frame ends the file (STOP inside it); see below
		}
		if hdr[0] != opFrame {
			return nil, false
		}
		flen := int64(binary.LittleEndian.Uint64(hdr[1:]))
		if flen < 0 || flen > size {
			return nil, false
		}
		if off >= int64(len(cuts))*target && len(cuts) < n {
			cuts = append(cuts, off)
		}
		off += 9 + flen
	}
	if off != size || len(cuts) < 2 {
		return nil, false
	}
	return append(cuts, size), true
}

type chunkScan struct {
	reads    readTable
	memoizes uint64
	need     int64 // the part needs at least this many slots written before it
	needAt   int64
	ops      int64
	err      error
	fallback bool
}

// scanChunk counts memo reads in [from, to), which starts at an opcode.
func scanChunk(src io.ReaderAt, from, to, size int64, lim Limits, last bool) (c chunkScan) {
	r := newReader(io.NewSectionReader(src, from, to-from), to-from)
	r.base = from
	stopped := false
	for r.offset() < to {
		if r.end-r.pos >= 10 {
			if n := c.run(r.buf[r.pos:r.end], r.base+int64(r.pos)); n > 0 {
				r.pos += n
				continue
			}
		} else if r.err == nil {
			_ = r.fill(10)
		}
		op, err := r.op()
		if err != nil {
			c.err = err
			return
		}
		c.ops++
		switch op {
		case opStop:
			stopped = true
			if r.offset() != to {
				c.err = &Error{Offset: r.opAt, Msg: "STOP before the end of the data"}
			}
			return
		case opMemoize:
			c.memoizes++
		case opBinGet, opLongBinGet:
			var id uint64
			if op == opBinGet {
				b, err := r.u8()
				c.err, id = err, uint64(b)
			} else {
				b, err := r.u32()
				c.err, id = err, uint64(b)
			}
			if c.err != nil {
				return
			}
			c.read(id, r.opAt)
		case opProto:
			if r.opAt != 0 {
				c.fallback = true
				return
			}
			if _, c.err = r.u8(); c.err != nil {
				return
			}
		case opBinPut, opLongBinPut, opPut, opGet:
			c.fallback = true // rare forms: let the serial scan handle them
			return
		default:
			if c.err = skipArg(r, op, lim); c.err != nil {
				return
			}
		}
	}
	if last && !stopped {
		c.err = &Error{Offset: size, Msg: "truncated: input ends before the STOP opcode"}
	}
	return
}

// run counts a stretch of common opcodes straight from the buffer (at least
// 10 bytes) and returns the bytes it used; base is the offset of b[0]. It
// spells out commonOp's cases inline: this loop is the planning pass's hot
// path, and the call costs a third of its time.
func (c *chunkScan) run(b []byte, base int64) int {
	pos := 0
	for len(b)-pos >= 10 {
		op := b[pos]
		if n := opSize[op]; n > 0 {
			pos += int(n)
			c.ops++
			continue
		}
		switch op {
		case opMemoize:
			c.memoizes++
			pos++
		case opBinGet:
			if id, at := uint64(b[pos+1]), base+int64(pos); !c.counted(id, at) {
				c.read(id, at)
			}
			pos += 2
		case opLongBinGet:
			if id, at := uint64(binary.LittleEndian.Uint32(b[pos+1:pos+5])), base+int64(pos); !c.counted(id, at) {
				c.read(id, at)
			}
			pos += 5
		case opLong1, opShortBinUnicode, opShortBinBytes:
			n := 2 + int(b[pos+1])
			if n > len(b)-pos {
				return pos
			}
			pos += n
		default:
			return pos
		}
		c.ops++
	}
	return pos
}

// counted is read's common case, small enough to be inlined into run: a
// slot in a page the part has, with nothing else to note. It says whether it
// counted the read.
func (c *chunkScan) counted(id uint64, at int64) bool {
	i := id / pageSlots
	if int64(id)-int64(c.memoizes) >= c.need || id >= uint64(at) || i >= uint64(len(c.reads.pages)) {
		return false
	}
	pg := c.reads.pages[i]
	if pg == nil {
		return false
	}
	if n := &pg[id%pageSlots]; *n < 255 {
		*n++
	}
	return true
}

func (c *chunkScan) read(id uint64, at int64) {
	if need := int64(id) - int64(c.memoizes) + 1; need > c.need {
		c.need, c.needAt = need, at
	}
	if id >= uint64(at) {
		return // never written: each slot below id takes a MEMOIZE byte before at
	}
	c.reads.add(id)
}
