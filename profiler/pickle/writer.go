package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
)

// Memo is the memo index of an object a Writer has written (MEMOIZE numbers
// objects 0, 1, 2, … in the order they are written). NoMemo: not memoised.
type Memo int64

// NoMemo is the Memo of a value that was not memoised (ints, floats, bools,
// None, the empty tuple).
const NoMemo Memo = -1

const (
	wFrameTarget = 64 << 10 // CPython's _FRAME_SIZE_TARGET
	wFrameMin    = 4        // frames shorter than this get no FRAME header
	wFrameHeader = 9        // FRAME opcode and its 8-byte length
	wBatchSize   = 1000     // items per APPENDS / SETITEMS
	wMaxGetMemo  = math.MaxUint32
	wBufSize     = wFrameTarget + 4<<10
)

// Writer encodes plain data — dicts, lists, tuples, str, bytes, int, float,
// bool, None — as a protocol-4 pickle, byte for byte as CPython's C pickler
// (pickle.dumps(obj, protocol=4)) would for the same objects, and streams it:
// containers are opened and closed around their items, so a list of any length
// is written without ever being held.
//
// Output follows CPython: PROTO 4, then FRAMEs committed once they reach 64 KiB
// at the start of a value (an opcode never straddles frames; strings and bytes
// of 64 KiB or more are written outside frames; the STOP is in the last frame).
// Every str, bytes, list, dict and non-empty tuple is followed by MEMOIZE, so its
// memo index (returned as a Memo) can be written again with Get (BINGET or
// LONG_BINGET), as CPython does for an object it has seen before. Lists and
// dicts are written EMPTY_LIST/EMPTY_DICT, MEMOIZE, then MARK … APPENDS/SETITEMS
// in batches of 1000; a container that turns out to hold a single item gets
// APPEND/SETITEM without a MARK, and a tuple of up to 3 items TUPLE1/2/3, when
// the opening MARK is still in the unflushed frame (always, unless the item
// itself spanned a frame boundary; then MARK … APPENDS is written, which loads
// the same). BeginListOf/BeginDictOf declare the length up front to avoid that.
//
// Every value is written by one call (None, Bool, Int, Uint, BigInt, Float, Str,
// Key, Bytes, Get, Ref, Value) or a Begin…/End… pair with its items written in
// between; inside a dict, calls alternate key, value. The top level holds one
// value. Structural misuse (an End without its Begin, a key with no value, a
// second top-level value, a value after Close) panics. I/O errors are sticky and
// returned by Close and Err; writes after one are dropped.
//
// A Writer writes to its io.Writer only whole frames (~64 KiB), so wrapping a
// file in a bufio.Writer is optional. Close does not close the io.Writer.
type Writer struct {
	out        io.Writer
	buf        []byte
	frameStart int // offset in buf of the open frame's header; -1: none open
	frameLimit int // len(buf) at which the open frame is due (0 when none is open)
	gen        int // number of times buf was flushed
	memo       int64
	stack      []wContainer
	done       bool // the top-level value is complete
	closed     bool
	err        error
	written    int64

	keys map[string]Memo
	refs map[any]Memo
	ids  map[any]Memo // Value: lists, dicts and sets already written
}

type wContainer struct {
	kind  byte  // 'l' list, 'd' dict, 't' tuple, 's' set
	n     int64 // items begun (pairs for a dict)
	left  int64 // items until the next call to batch
	half  bool  // dict: the key of pair n is written, its value is not
	known int64 // declared length; -1 unknown
	mark  int   // offset in buf of a MARK that may still be taken back; -1 none
	gen   int   // w.gen when mark was written
}

// NewWriter returns a Writer that writes a pickle to out. The PROTO opcode is
// written with the first frame.
func NewWriter(out io.Writer) *Writer {
	w := &Writer{out: out, frameStart: -1, buf: make([]byte, 0, wBufSize),
		keys: map[string]Memo{}}
	w.buf = append(w.buf, opProto, 4)
	return w
}

// Err returns the first I/O error, if any.
func (w *Writer) Err() error { return w.err }

// Written is the number of bytes handed to the underlying writer so far.
func (w *Writer) Written() int64 { return w.written }

// Memos is the number of memo slots written so far (the Memo the next
// memoised object will get).
func (w *Writer) Memos() int64 { return w.memo }

// Close finishes the pickle: it writes STOP, commits the last frame and writes
// out everything buffered. Containers must all be closed and one top-level
// value written.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	if len(w.stack) > 0 {
		return fmt.Errorf("pickle: Close with %d containers still open", len(w.stack))
	}
	if !w.done {
		return errors.New("pickle: Close before any value was written")
	}
	w.closed = true
	w.raw1(opStop)
	w.commit()
	w.flush()
	return w.err
}

// ---- framing and raw output ----

// openFrame starts a frame, as CPython's _Pickler_Write does when none is open.
func (w *Writer) openFrame() {
	w.frameStart = len(w.buf)
	w.frameLimit = w.frameStart + wFrameHeader + wFrameTarget
	w.buf = append(w.buf, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe)
}

func (w *Writer) raw1(b byte) {
	if w.frameStart < 0 {
		w.openFrame()
	}
	w.buf = append(w.buf, b)
}

func (w *Writer) raw2(a, b byte) {
	if w.frameStart < 0 {
		w.openFrame()
	}
	w.buf = append(w.buf, a, b)
}

// commit fills in the open frame's header (or removes it from a frame too
// short to be worth one), as _Pickler_CommitFrame.
func (w *Writer) commit() {
	if w.frameStart < 0 {
		return
	}
	n := len(w.buf) - w.frameStart - wFrameHeader
	if n >= wFrameMin {
		w.buf[w.frameStart] = opFrame
		binary.LittleEndian.PutUint64(w.buf[w.frameStart+1:], uint64(n))
	} else {
		copy(w.buf[w.frameStart:], w.buf[w.frameStart+wFrameHeader:])
		w.buf = w.buf[:len(w.buf)-wFrameHeader]
	}
	w.frameStart, w.frameLimit = -1, 0
}

func (w *Writer) flush() {
	if len(w.buf) > 0 && w.err == nil {
		n, err := w.out.Write(w.buf)
		w.written += int64(n)
		if err == nil && n < len(w.buf) {
			err = io.ErrShortWrite
		}
		w.err = err
	}
	w.buf = w.buf[:0]
	w.gen++
}

// begin is called at the start of every value: it counts the value as an item
// of the open container (closing a batch of 1000 first) and, like the start of
// CPython's save(), commits the frame once it has reached 64 KiB.
func (w *Writer) begin() {
	if n := len(w.stack); n > 0 {
		c := &w.stack[n-1]
		if c.kind == 'd' {
			c.half = !c.half
			if c.half {
				w.item(c)
			}
		} else {
			w.item(c)
		}
	} else {
		w.topLevel()
	}
	if len(w.buf) >= w.frameLimit {
		w.frameBoundary()
	}
}

func (w *Writer) item(c *wContainer) {
	if c.left == 0 {
		w.batch(c)
	}
	c.left--
	c.n++
}

// batch runs when a container's countdown ends: at a batch of 1000 items
// (write APPENDS/SETITEMS/ADDITEMS and a new MARK) or at its declared length.
func (w *Writer) batch(c *wContainer) {
	if c.known >= 0 && c.n >= c.known {
		panic(fmt.Sprintf("pickle: more than the %d items declared", c.known))
	}
	if c.n > 0 && c.n%wBatchSize == 0 {
		switch c.kind {
		case 'l':
			w.raw2(opAppends, opMark)
		case 'd':
			w.raw2(opSetItems, opMark)
		case 's':
			w.raw2(opAddItems, opMark)
		}
	}
	c.left = wBatchSize - c.n%wBatchSize
	if c.kind == 't' {
		c.left = math.MaxInt64
	}
	if c.known >= 0 {
		c.left = min(c.left, c.known-c.n)
	}
}

func (w *Writer) topLevel() {
	switch {
	case w.closed:
		panic("pickle: value written after Close")
	case w.done:
		panic("pickle: a second top-level value")
	}
	w.done = true
}

// frameBoundary commits a frame that has reached 64 KiB and writes it out, and
// opens a frame if none is open.
func (w *Writer) frameBoundary() {
	if w.frameStart >= 0 {
		w.commit()
		w.flush()
	}
	w.openFrame()
}

func (w *Writer) memoize() Memo {
	w.buf = append(w.buf, opMemoize)
	w.memo++
	return Memo(w.memo - 1)
}

// ---- atoms ----

// None writes None.
func (w *Writer) None() {
	w.begin()
	w.buf = append(w.buf, opNone)
}

// Bool writes True or False.
func (w *Writer) Bool(b bool) {
	w.begin()
	if b {
		w.buf = append(w.buf, opNewTrue)
	} else {
		w.buf = append(w.buf, opNewFalse)
	}
}

// Int writes an int: BININT1, BININT2 or BININT when it fits 32 signed bits,
// else LONG1 with the fewest two's-complement bytes.
func (w *Writer) Int(n int64) {
	w.begin()
	w.int(n)
}

func (w *Writer) int(n int64) {
	switch {
	case n >= 0 && n <= 0xff:
		w.buf = append(w.buf, opBinInt1, byte(n))
	case n >= 0 && n <= 0xffff:
		w.buf = append(w.buf, opBinInt2, byte(n), byte(n>>8))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		w.buf = append(w.buf, opBinInt, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	default:
		// LONG1 with the fewest two's-complement bytes that hold the sign.
		m := uint64(n)
		if n < 0 {
			m = ^m
		}
		k := bits.Len64(m)/8 + 1
		w.buf = append(w.buf, opLong1, byte(k))
		w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(n))
		w.buf = w.buf[:len(w.buf)-8+k]
	}
}

// Uint writes a non-negative int up to 2^64-1.
func (w *Writer) Uint(n uint64) {
	w.begin()
	if n <= math.MaxInt64 {
		w.int(int64(n))
		return
	}
	w.buf = append(w.buf, opLong1, 9)
	w.buf = binary.LittleEndian.AppendUint64(w.buf, n)
	w.buf = append(w.buf, 0)
}

// BigInt writes an int of any size (LONG1, or LONG4 past 255 bytes).
func (w *Writer) BigInt(x *big.Int) {
	if x.IsInt64() {
		w.Int(x.Int64())
		return
	}
	w.begin()
	// Two's complement, little-endian, in the fewest bytes that hold the sign.
	k := x.BitLen()/8 + 1
	mag := new(big.Int).Set(x)
	if x.Sign() < 0 {
		mag.Add(mag, new(big.Int).Lsh(big.NewInt(1), uint(8*k)))
	}
	be := mag.FillBytes(make([]byte, k))
	if x.Sign() < 0 && k > 1 && be[0] == 0xff && be[1]&0x80 != 0 {
		be, k = be[1:], k-1
	}
	if k < 256 {
		w.buf = append(w.buf, opLong1, byte(k))
	} else {
		w.buf = append(w.buf, opLong4)
		w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(k))
	}
	for i := k - 1; i >= 0; i-- {
		w.buf = append(w.buf, be[i])
	}
}

// Float writes a float (BINFLOAT).
func (w *Writer) Float(f float64) {
	w.begin()
	w.buf = append(w.buf, opBinFloat)
	w.buf = binary.BigEndian.AppendUint64(w.buf, math.Float64bits(f))
}

// Str writes a new str object (SHORT_BINUNICODE, BINUNICODE or BINUNICODE8)
// and memoises it. s must be UTF-8 (it is written as is).
func (w *Writer) Str(s string) Memo {
	w.begin()
	n := len(s)
	switch {
	case n <= 0xff:
		w.buf = append(w.buf, opShortBinUnicode, byte(n))
	case n <= math.MaxUint32:
		w.buf = append(w.buf, opBinUnicode)
		w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(n))
	default:
		w.buf = append(w.buf, opBinUnicode8)
		w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(n))
	}
	w.payload(s)
	return w.memoize()
}

// Bytes writes a new bytes object (SHORT_BINBYTES, BINBYTES or BINBYTES8) and
// memoises it.
func (w *Writer) Bytes(b []byte) Memo {
	w.begin()
	n := len(b)
	switch {
	case n <= 0xff:
		w.buf = append(w.buf, opShortBinBytes, byte(n))
	case n <= math.MaxUint32:
		w.buf = append(w.buf, opBinBytes)
		w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(n))
	default:
		w.buf = append(w.buf, opBinBytes8)
		w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(n))
	}
	w.payload(string(b))
	return w.memoize()
}

// payload appends string or bytes data. Data of 64 KiB or more goes outside
// any frame, after its opcode and length (CPython's _Pickler_write_bytes): the
// frame before it is committed without the header, which follows unframed.
func (w *Writer) payload(s string) {
	if len(s) < wFrameTarget {
		w.buf = append(w.buf, s...)
		return
	}
	// The opcode and length were appended to the open frame; move them out.
	h := 1 + 4
	if len(s) > math.MaxUint32 {
		h = 1 + 8
	}
	var hdr [9]byte
	copy(hdr[:], w.buf[len(w.buf)-h:])
	w.buf = w.buf[:len(w.buf)-h]
	w.commit()
	w.buf = append(w.buf, hdr[:h]...)
	w.flush()
	if w.err == nil {
		n, err := io.WriteString(w.out, s)
		w.written += int64(n)
		w.err = err
	}
	// The MEMOIZE that follows opens a new frame.
	w.openFrame()
}

// Key writes s as a shared str: the first time as a new memoised str, after
// that as a GET of it — what CPython writes for one interned string object
// (dict keys, repeated constants). It returns the Memo.
func (w *Writer) Key(s string) Memo {
	if m, ok := w.keys[s]; ok && m <= wMaxGetMemo {
		w.Get(m)
		return m
	}
	m := w.Str(s)
	w.keys[s] = m
	return m
}

// Get writes a GET of an object memoised earlier (BINGET below 256, else
// LONG_BINGET). It panics if m was never written or is past LONG_BINGET's reach;
// CanGet says.
func (w *Writer) Get(m Memo) {
	if !w.CanGet(m) {
		panic(fmt.Sprintf("pickle: Get(%d) with %d memo slots written", m, w.memo))
	}
	w.begin()
	if m < 256 {
		w.buf = append(w.buf, opBinGet, byte(m))
	} else {
		w.buf = append(w.buf, opLongBinGet, byte(m), byte(m>>8), byte(m>>16), byte(m>>24))
	}
}

// CanGet reports whether Get(m) can refer to m.
func (w *Writer) CanGet(m Memo) bool {
	return m >= 0 && int64(m) < w.memo && m <= wMaxGetMemo
}

// Bind names a memoised object with a key of the caller's choosing (any
// comparable value) for Ref.
func (w *Writer) Bind(key any, m Memo) {
	if w.refs == nil {
		w.refs = map[any]Memo{}
	}
	w.refs[key] = m
}

// Ref writes a GET of the object bound to key and reports true, or writes
// nothing and reports false if key is unbound (or out of LONG_BINGET's reach):
//
//	if !w.Ref(k) { w.Bind(k, w.BeginList()); …; w.EndList() }
func (w *Writer) Ref(key any) bool {
	m, ok := w.refs[key]
	if !ok || !w.CanGet(m) {
		return false
	}
	w.Get(m)
	return true
}

// ---- containers ----

func (w *Writer) open(kind byte, known int64) {
	c := wContainer{kind: kind, known: known, mark: -1}
	if known != 0 && known != 1 {
		if known < 0 {
			c.mark, c.gen = len(w.buf), w.gen
		}
		w.buf = append(w.buf, opMark)
	}
	w.stack = append(w.stack, c)
}

func (w *Writer) close(kind byte) wContainer {
	n := len(w.stack)
	if n == 0 || w.stack[n-1].kind != kind {
		panic(fmt.Sprintf("pickle: End of a %c with no such wContainer open", kind))
	}
	c := w.stack[n-1]
	w.stack = w.stack[:n-1]
	if c.known >= 0 && c.n != c.known {
		panic(fmt.Sprintf("pickle: %d items written, %d declared", c.n, c.known))
	}
	return c
}

// takeBackMark removes a container's opening MARK if it is still in the
// unflushed buffer (nothing after it belongs to an open container).
func (w *Writer) takeBackMark(c wContainer) bool {
	if c.mark < 0 || c.gen != w.gen {
		return false
	}
	copy(w.buf[c.mark:], w.buf[c.mark+1:])
	w.buf = w.buf[:len(w.buf)-1]
	return true
}

// BeginList opens a list of items to come and returns its Memo.
func (w *Writer) BeginList() Memo { return w.beginList(-1) }

// BeginListOf opens a list that will hold exactly n items.
func (w *Writer) BeginListOf(n int64) Memo { return w.beginList(n) }

func (w *Writer) beginList(n int64) Memo {
	w.begin()
	w.buf = append(w.buf, opEmptyList)
	m := w.memoize()
	w.open('l', n)
	return m
}

// EndList closes the innermost open container, which must be a list.
func (w *Writer) EndList() {
	c := w.close('l')
	switch {
	case c.n == 0:
		w.takeBackMark(c)
	case c.n == 1 && (c.known == 1 || w.takeBackMark(c)):
		w.raw1(opAppend)
	default:
		w.raw1(opAppends)
	}
}

// BeginDict opens a dict; write its keys and values alternately.
func (w *Writer) BeginDict() Memo { return w.beginDict(-1) }

// BeginDictOf opens a dict that will hold exactly n pairs.
func (w *Writer) BeginDictOf(n int64) Memo { return w.beginDict(n) }

func (w *Writer) beginDict(n int64) Memo {
	w.begin()
	w.buf = append(w.buf, opEmptyDict)
	m := w.memoize()
	w.open('d', n)
	return m
}

// EndDict closes the innermost open container, which must be a dict.
func (w *Writer) EndDict() {
	c := w.close('d')
	if c.half {
		panic("pickle: EndDict after a key with no value")
	}
	switch {
	case c.n == 0:
		w.takeBackMark(c)
	case c.n == 1 && (c.known == 1 || w.takeBackMark(c)):
		w.raw1(opSetItem)
	default:
		w.raw1(opSetItems)
		if c.n%wBatchSize == 0 {
			// CPython's batch_dict_exact loops while a batch was full, so a
			// dict of 1000·k pairs ends with an empty MARK SETITEMS.
			w.raw2(opMark, opSetItems)
		}
	}
}

// BeginTuple opens a tuple.
func (w *Writer) BeginTuple() {
	w.begin()
	w.open('t', -1)
}

// EndTuple closes the innermost open container, which must be a tuple, and
// returns its Memo (NoMemo for the empty tuple, which CPython does not memoise).
func (w *Writer) EndTuple() Memo {
	c := w.close('t')
	switch {
	case c.n == 0 && w.takeBackMark(c):
		w.raw1(opEmptyTuple)
		return NoMemo
	case c.n >= 1 && c.n <= 3 && w.takeBackMark(c):
		w.raw1(opTuple1 + byte(c.n-1))
	default:
		w.raw1(opTuple)
	}
	return w.memoize()
}

// beginSet opens a set (EMPTY_SET, MEMOIZE, MARK … ADDITEMS in batches of
// 1000), for Value.
func (w *Writer) beginSet() Memo {
	w.begin()
	w.buf = append(w.buf, opEmptySet)
	m := w.memoize()
	w.open('s', -1)
	return m
}

func (w *Writer) endSet() {
	c := w.close('s')
	if c.n == 0 && w.takeBackMark(c) {
		return
	}
	w.raw1(opAddItems)
	if c.n%wBatchSize == 0 {
		w.raw2(opMark, opAddItems)
	}
}

// Value writes a decoded value. A list, dict or set met again (the same
// *List, *Dict or *Set) is written as a GET, as CPython does for an object it
// has already pickled; strings, bytes and tuples are written anew each time.
func (w *Writer) Value(v Value) {
	switch v.Kind {
	case None:
		w.None()
	case Bool:
		w.Bool(v.Num != 0)
	case Int:
		w.Int(v.Num)
	case BigInt:
		w.BigInt(v.Ref.(*big.Int))
	case Float:
		w.Float(math.Float64frombits(uint64(v.Num)))
	case Str:
		w.Str(v.Text)
	case Bytes:
		w.Bytes([]byte(v.Text))
	case Tuple:
		w.BeginTuple()
		for _, it := range v.Ref.([]Value) {
			w.Value(it)
		}
		w.EndTuple()
	case ListKind, DictKind, SetKind:
		if m, ok := w.ids[v.Ref]; ok && w.CanGet(m) {
			w.Get(m)
			return
		}
		if w.ids == nil {
			w.ids = map[any]Memo{}
		}
		switch r := v.Ref.(type) {
		case *List:
			w.ids[r] = w.BeginList()
			for _, it := range r.Items {
				w.Value(it)
			}
			w.EndList()
		case *Dict:
			w.ids[r] = w.BeginDict()
			for _, it := range r.Items {
				w.Value(it)
			}
			w.EndDict()
		case *Set:
			w.ids[r] = w.beginSet()
			for _, it := range r.Items {
				w.Value(it)
			}
			w.endSet()
		}
	default:
		panic(fmt.Sprintf("pickle: cannot write a %s", v.TypeName()))
	}
}
