package pickle

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
)

// Machine runs the decoding pass over a pickle that Scan has planned.
type Machine struct {
	// OnAppend, when set, is offered every batch of items appended to a list.
	// It returns true when it consumed them, in which case the list keeps only
	// its Count; otherwise the items are stored in the list as usual.
	OnAppend func(l *List, items []Value) (bool, error)
	// OnFlatDict, when set, receives flat dicts appended to a list whose Tag
	// is set, straight from the input (see flat.go).
	OnFlatDict FlatFunc

	pend     flatPending
	keys     [maxFlatPairs]flatGetCache
	vals     [maxFlatPairs]flatValCache
	gets     [maxFlatPairs][4]flatGetCache
	getsNext [maxFlatPairs]uint8
	err      error // an error from OnFlatDict inside the fast path
	// Inline lists of lasting items, by their bytes, as OnAppend left them
	// (flat.go): a trace entry's stack recurs millions of times.
	lists     map[string]*List
	listBytes int

	lim     Limits
	plan    *Plan
	r       *reader
	stack   []Value
	marks   []int
	memo    memoTable
	memoLen uint64
	seen    bitset // slots written, kept only when a slot may be written twice
	once    bool   // the plan saw every slot written once, in order: seen is not needed
	held    int64  // values stored in containers
	intern  map[string]string
	free    []*Dict
}

// NewMachine prepares a decoding pass; plan must come from Scan of the same bytes.
func NewMachine(src io.Reader, size int64, plan *Plan, lim Limits) *Machine {
	return &Machine{lim: lim, plan: plan, r: newReader(src, size), memo: newMemoTable(), once: !plan.puts,
		intern: map[string]string{}, stack: make([]Value, 0, 4096)}
}

// Release hands a consumed dict back for reuse. It does nothing for a dict a
// memo slot holds or held, or that DUP copied, so a caller may release
// whatever it consumed.
func (m *Machine) Release(d *Dict) {
	if d.kept {
		return
	}
	m.held -= int64(len(d.Items))
	d.Items = d.Items[:0]
	d.Tag, d.Mark = nil, 0
	m.free = append(m.free, d)
}

func (m *Machine) fail(format string, args ...any) error {
	return &Error{Offset: m.r.opAt, Msg: fmt.Sprintf(format, args...)}
}

func (m *Machine) push(v Value) error {
	if len(m.stack) >= m.lim.MaxStack {
		return m.fail("stack deeper than %d values", m.lim.MaxStack)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *Machine) pop() (Value, error) {
	n := len(m.stack)
	if n == 0 || (len(m.marks) > 0 && m.marks[len(m.marks)-1] == n) {
		return Value{}, m.fail("stack underflow")
	}
	v := m.stack[n-1]
	m.stack = m.stack[:n-1]
	return v, nil
}

func (m *Machine) top() (*Value, error) {
	n := len(m.stack)
	if n == 0 || (len(m.marks) > 0 && m.marks[len(m.marks)-1] == n) {
		return nil, m.fail("stack underflow")
	}
	return &m.stack[n-1], nil
}

// popMark returns the values above the topmost MARK and removes them and it.
// The slice aliases the stack and is valid until the next push.
func (m *Machine) popMark() ([]Value, error) {
	if len(m.marks) == 0 {
		return nil, m.fail("no MARK on the stack")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := m.stack[k:]
	m.stack = m.stack[:k]
	return items, nil
}

func (m *Machine) hold(n int) error {
	m.held += int64(n)
	if m.held > m.lim.MaxHeld {
		return m.fail("more than %d values held in containers", m.lim.MaxHeld)
	}
	return nil
}

func (m *Machine) str(b []byte) Value {
	if len(b) <= 64 {
		if s, ok := m.intern[string(b)]; ok {
			return Value{Kind: Str, Text: s}
		}
		s := string(b)
		if len(m.intern) < 1<<20 {
			m.intern[s] = s
		}
		return Value{Kind: Str, Text: s}
	}
	return Value{Kind: Str, Text: string(b)}
}

func (m *Machine) newDict() *Dict {
	if n := len(m.free); n > 0 {
		d := m.free[n-1]
		m.free = m.free[:n-1]
		return d
	}
	return &Dict{}
}

// Run decodes until STOP and returns the pickled object.
func (m *Machine) Run() (Value, error) {
	r := m.r
	for {
		if r.end-r.pos < lowWater && r.err == nil {
			_ = r.fill(min(lowWater, len(r.buf))) // errors are the slow path's to report
		}
		if r.end-r.pos >= 16 {
			keep := 16
			if r.err == nil {
				keep = min(lowWater, len(r.buf)) // stop early: the refill above comes first
			}
			n := m.fast(r.buf[r.pos:r.end], keep)
			if m.err != nil {
				r.opAt = r.base + int64(r.pos+n)
				return Value{}, &Error{Offset: r.opAt, Msg: m.err.Error()}
			}
			if n > 0 {
				r.pos += n
				continue
			}
		}
		op, err := m.r.op()
		if err != nil {
			return Value{}, err
		}
		if op == opStop {
			v, err := m.pop()
			if err != nil {
				return Value{}, m.fail("STOP with an empty stack")
			}
			return v, nil
		}
		if err := m.step(op); err != nil {
			return Value{}, err
		}
	}
}

// lowWater is how much of the input the fast path leaves in the buffer before
// a refill: more than a trace entry, so that entries near the end of one read
// still take the flat path (one built the slow way holds up the rest of its
// batch of a thousand).
const lowWater = 4096

// fast decodes a run of the commonest opcodes straight from the buffer, as
// long as at least keep (>= 16) bytes remain, and returns how many bytes it
// consumed. It stops at anything unusual, which step then handles with every
// check. The stack lives in a local variable for the length of the run.
func (m *Machine) fast(b []byte, keep int) int {
	stack := m.stack
	reads, low, lowUsed := m.plan.reads, m.memo.low, m.memo.lowUsed
	maxStack := m.lim.MaxStack
	pos := 0
loop:
	for len(b)-pos >= keep && len(stack) < maxStack {
		var v Value
		n := 1
		switch b[pos] {
		case opBinGet, opLongBinGet:
			id := uint64(b[pos+1])
			n = 2
			if b[pos] == opLongBinGet {
				id, n = uint64(binary.LittleEndian.Uint32(b[pos+1:pos+5])), 5
			}
			// Only slots read so often they are never dropped; the rest need bookkeeping.
			if id >= uint64(len(low)) || !lowUsed[id] || reads[id] != 255 {
				break loop
			}
			if v = low[id]; v.Kind == ListKind && v.Ref.(*List).shared {
				break loop // get makes the slot's own copy
			}
		case opMemoize:
			// A slot never read back and never written before needs no storing.
			id := m.memoLen
			if len(stack) == 0 || (len(m.marks) > 0 && m.marks[len(m.marks)-1] == len(stack)) ||
				id >= uint64(len(reads)) || reads[id] != 0 || !m.once && m.seen.has(id) {
				break loop
			}
			if !m.once {
				m.seen.add(id)
			}
			m.memoLen++
			pos++
			continue
		case opMark:
			if len(m.marks) >= m.lim.MaxMarks {
				break loop
			}
			m.marks = append(m.marks, len(stack))
			pos++
			continue
		case opEmptyDict:
			if m.OnFlatDict != nil && len(m.marks) > 0 && m.marks[len(m.marks)-1] == len(stack) && len(stack) > 0 {
				// The next item of a batch, none waiting: a claimed list may take it raw.
				if l, ok := stack[len(stack)-1].Ref.(*List); ok && l.Tag != nil {
					// Flat dicts come in runs: a batch of entries. Nothing
					// on the stack changes between them.
					m.stack = stack
					start := pos
					for {
						k, err := m.flat(l, b[pos:])
						if err != nil {
							m.err = err
							break loop
						}
						pos += k
						if k == 0 || len(b)-pos < keep || b[pos] != opEmptyDict {
							break
						}
					}
					if pos > start {
						continue
					}
				}
			}
			v = Value{Kind: DictKind, Ref: m.newDict()}
		case opEmptyList:
			v = Value{Kind: ListKind, Ref: &List{}}
		default:
			if v, n = m.scalar(b[pos:]); n == 0 {
				break loop
			}
		}
		stack = append(stack, v)
		pos += n
	}
	m.stack = stack
	return pos
}

// scalar decodes a number, None, a bool or a short string at b[0], the values
// both fast paths take inline; n is 0 for anything else or a cut-off argument.
func (m *Machine) scalar(b []byte) (v Value, n int) {
	if len(b) == 0 {
		return Value{}, 0
	}
	switch op := b[0]; {
	case op == opNone:
		return Value{Kind: None}, 1
	case op == opNewTrue:
		return Value{Kind: Bool, Num: 1}, 1
	case op == opNewFalse:
		return Value{Kind: Bool}, 1
	case op == opBinInt1 && len(b) >= 2:
		return Value{Kind: Int, Num: int64(b[1])}, 2
	case op == opBinInt2 && len(b) >= 3:
		return Value{Kind: Int, Num: int64(binary.LittleEndian.Uint16(b[1:3]))}, 3
	case op == opBinInt && len(b) >= 5:
		return Value{Kind: Int, Num: int64(int32(binary.LittleEndian.Uint32(b[1:5])))}, 5
	case op == opBinFloat && len(b) >= 9:
		return Value{Kind: Float, Num: int64(binary.BigEndian.Uint64(b[1:9]))}, 9
	case op == opLong1 && len(b) >= 10 && b[1] <= 8:
		// One 8-byte load, then drop the bytes past the integer and sign-extend.
		shift := 64 - 8*uint(b[1])
		return Value{Kind: Int, Num: int64(binary.LittleEndian.Uint64(b[2:10])<<shift) >> shift}, 2 + int(b[1])
	case op == opLong1 && len(b) >= 2 && b[1] <= 8 && len(b) >= 2+int(b[1]):
		return decodeLong(b[2 : 2+int(b[1])]), 2 + int(b[1])
	case op == opShortBinUnicode && len(b) >= 2 && len(b) >= 2+int(b[1]):
		return m.str(b[2 : 2+int(b[1])]), 2 + int(b[1])
	}
	return Value{}, 0
}

func (m *Machine) step(op byte) error {
	r := m.r
	switch op {
	case opMark:
		if len(m.marks) >= m.lim.MaxMarks {
			return m.fail("MARKs nested deeper than %d", m.lim.MaxMarks)
		}
		m.marks = append(m.marks, len(m.stack))
	case opEmptyDict:
		return m.push(Value{Kind: DictKind, Ref: m.newDict()})
	case opEmptyList:
		return m.push(Value{Kind: ListKind, Ref: &List{}})
	case opEmptyTuple:
		return m.push(Value{Kind: Tuple, Ref: []Value(nil)})
	case opEmptySet:
		return m.push(Value{Kind: SetKind, Ref: &Set{}})
	case opNone:
		return m.push(Value{Kind: None})
	case opNewTrue:
		return m.push(Value{Kind: Bool, Num: 1})
	case opNewFalse:
		return m.push(Value{Kind: Bool})
	case opBinInt1:
		b, err := r.u8()
		if err != nil {
			return err
		}
		return m.push(Value{Kind: Int, Num: int64(b)})
	case opBinInt2:
		b, err := r.u16()
		if err != nil {
			return err
		}
		return m.push(Value{Kind: Int, Num: int64(b)})
	case opBinInt:
		b, err := r.u32()
		if err != nil {
			return err
		}
		return m.push(Value{Kind: Int, Num: int64(int32(b))})
	case opLong1:
		n, err := r.u8()
		if err != nil {
			return err
		}
		b, err := r.bytes(int(n))
		if err != nil {
			return err
		}
		return m.push(decodeLong(b))
	case opLong4:
		n, err := r.u32()
		if err != nil {
			return err
		}
		if int32(n) < 0 {
			return m.fail("negative LONG4 length")
		}
		b, err := r.blob(uint64(n), m.lim.MaxString)
		if err != nil {
			return err
		}
		return m.push(decodeLong(b))
	case opBinFloat:
		b, err := r.bytes(8)
		if err != nil {
			return err
		}
		return m.push(Value{Kind: Float, Num: int64(binary.BigEndian.Uint64(b))})
	case opShortBinUnicode, opShortBinString, opShortBinBytes:
		n, err := r.u8()
		if err != nil {
			return err
		}
		return m.text(op, uint64(n))
	case opBinUnicode, opBinString, opBinBytes:
		n, err := r.u32()
		if err != nil {
			return err
		}
		if op == opBinString && int32(n) < 0 {
			return m.fail("negative string length")
		}
		return m.text(op, uint64(n))
	case opBinUnicode8, opBinBytes8, opByteArray8:
		n, err := r.u64()
		if err != nil {
			return err
		}
		return m.text(op, n)
	case opInt, opLong, opFloat:
		return m.textNumber(op)
	case opMemoize:
		return m.put(m.memoLen)
	case opBinPut:
		id, err := r.u8()
		if err != nil {
			return err
		}
		return m.put(uint64(id))
	case opLongBinPut:
		id, err := r.u32()
		if err != nil {
			return err
		}
		return m.put(uint64(id))
	case opPut:
		id, err := textIndex(r)
		if err != nil {
			return err
		}
		return m.put(id)
	case opBinGet:
		id, err := r.u8()
		if err != nil {
			return err
		}
		return m.get(uint64(id))
	case opLongBinGet:
		id, err := r.u32()
		if err != nil {
			return err
		}
		return m.get(uint64(id))
	case opGet:
		id, err := textIndex(r)
		if err != nil {
			return err
		}
		return m.get(id)
	default:
		return m.structural(op)
	}
	return nil
}

// structural handles the opcodes that combine values already on the stack.
func (m *Machine) structural(op byte) error {
	switch op {
	case opAppend:
		v, err := m.pop()
		if err != nil {
			return err
		}
		return m.appendTo(1, []Value{v})
	case opAppends:
		items, err := m.popMark()
		if err != nil {
			return err
		}
		return m.appendTo(0, items)
	case opSetItem:
		v, err := m.pop()
		if err != nil {
			return err
		}
		k, err := m.pop()
		if err != nil {
			return err
		}
		return m.setItems([]Value{k, v})
	case opSetItems:
		items, err := m.popMark()
		if err != nil {
			return err
		}
		return m.setItems(items)
	case opAddItems:
		items, err := m.popMark()
		if err != nil {
			return err
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		s, ok := t.Ref.(*Set)
		if t.Kind != SetKind || !ok {
			return m.fail("ADDITEMS on a %s", t.TypeName())
		}
		if err := m.hold(len(items)); err != nil {
			return err
		}
		s.Items = append(s.Items, items...)
	case opTuple, opList, opDict, opFrozenSet:
		items, err := m.popMark()
		if err != nil {
			return err
		}
		return m.collect(op, items)
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(m.stack) < n || (len(m.marks) > 0 && len(m.stack)-m.marks[len(m.marks)-1] < n) {
			return m.fail("stack underflow")
		}
		t := append([]Value(nil), m.stack[len(m.stack)-n:]...)
		m.stack = m.stack[:len(m.stack)-n]
		return m.push(Value{Kind: Tuple, Ref: t})
	case opPop:
		_, err := m.pop()
		return err
	case opPopMark:
		_, err := m.popMark()
		return err
	case opDup:
		t, err := m.top()
		if err != nil {
			return err
		}
		keep(*t)
		return m.push(*t)
	case opFrame:
		_, err := m.r.bytes(8)
		return err
	case opProto:
		v, err := m.r.u8()
		if err != nil {
			return err
		}
		if v > 5 {
			return m.fail("unsupported pickle protocol %d", v)
		}
	case opString, opUnicode:
		return m.fail("text-mode string opcodes (protocol 0) are not supported")
	default:
		if name, ok := refused[op]; ok {
			return m.fail("refusing opcode %s: it would import or call code; a snapshot holds only plain data", name)
		}
		return m.fail("not a pickle opcode: 0x%02x", op)
	}
	return nil
}

func (m *Machine) collect(op byte, items []Value) error {
	own := append([]Value(nil), items...)
	switch op {
	case opTuple:
		return m.push(Value{Kind: Tuple, Ref: own})
	case opFrozenSet:
		return m.push(Value{Kind: SetKind, Ref: &Set{Items: own, Frozen: true}})
	case opList:
		l := &List{}
		if err := m.push(Value{Kind: ListKind, Ref: l}); err != nil {
			return err
		}
		return m.appendTo(0, own)
	}
	if len(own)%2 != 0 {
		return m.fail("DICT with an odd number of items")
	}
	if err := m.push(Value{Kind: DictKind, Ref: m.newDict()}); err != nil {
		return err
	}
	return m.setItems(own)
}

// appendTo adds items to the list on top of the stack.
func (m *Machine) appendTo(_ int, items []Value) error {
	t, err := m.top()
	if err != nil {
		return err
	}
	switch t.Kind {
	case ListKind:
	case SetKind: // CPython accepts APPENDS on anything with extend; sets are the only other container here
		return m.fail("APPEND on a set")
	default:
		return m.fail("APPEND on a %s", t.TypeName())
	}
	l := t.Ref.(*List)
	l.Count += int64(len(items))
	if m.OnAppend != nil {
		done, err := m.OnAppend(l, items)
		if err != nil {
			return &Error{Offset: m.r.opAt, Msg: err.Error()}
		}
		if done {
			return nil
		}
	}
	if err := m.hold(len(items)); err != nil {
		return err
	}
	l.Items = append(l.Items, items...)
	return nil
}

func (m *Machine) setItems(kv []Value) error {
	t, err := m.top()
	if err != nil {
		return err
	}
	if t.Kind != DictKind {
		return m.fail("SETITEMS on a %s", t.TypeName())
	}
	if len(kv)%2 != 0 {
		return m.fail("SETITEMS with an odd number of items")
	}
	for i := 0; i < len(kv); i += 2 {
		switch k := kv[i]; k.Kind {
		case ListKind, DictKind:
			return m.fail("unhashable dict key of type %s", k.TypeName())
		case SetKind:
			if !k.Ref.(*Set).Frozen {
				return m.fail("unhashable dict key of type set")
			}
		}
	}
	if err := m.hold(len(kv)); err != nil {
		return err
	}
	d := t.Ref.(*Dict)
	d.Items = append(d.Items, kv...)
	return nil
}

func (m *Machine) put(id uint64) error {
	t, err := m.top()
	if err != nil {
		return m.fail("memo put with an empty stack")
	}
	if m.once {
		if id != m.memoLen {
			return m.fail("memo slot %d written out of order, unlike in the planning pass (did the input change?)", id)
		}
		m.memoLen++
	} else if m.seen.add(id) {
		m.memoLen++
	} else {
		m.keys = [maxFlatPairs]flatGetCache{} // a slot is overwritten: forget cached keys, values and lists
		m.gets = [maxFlatPairs][4]flatGetCache{}
		clear(m.lists)
		m.listBytes = 0
	}
	if _, ok := m.memo.get(id); ok {
		m.memo.del(id)
	}
	if m.plan.wanted(id) {
		m.memo.set(id, *t)
		keep(*t)
	}
	return nil
}

// keep marks a dict that is about to have a second reference (a memo slot
// read back later, or DUP) as never to be recycled.
func keep(v Value) {
	if d, ok := v.Ref.(*Dict); ok {
		d.kept = true
	}
}

func (m *Machine) get(id uint64) error {
	v, ok := m.memo.get(id)
	if !ok {
		return m.fail("memo slot %d is read before it is written (or read more often than planned)", id)
	}
	last := m.plan.consume(id)
	if l, ok := v.Ref.(*List); ok && l.shared {
		// A list the flat path shares: this slot's own copy from now on.
		c := *l
		c.shared = false
		v.Ref = &c
		if !last {
			m.memo.del(id)
			m.memo.set(id, v)
		}
	}
	if last {
		m.memo.del(id)
	}
	return m.push(v)
}

func (m *Machine) text(op byte, n uint64) error {
	b, err := m.r.blob(n, m.lim.MaxString)
	if err != nil {
		return err
	}
	switch op {
	case opShortBinBytes, opBinBytes, opBinBytes8, opByteArray8:
		return m.push(Value{Kind: Bytes, Text: string(b)})
	}
	return m.push(m.str(b))
}

func (m *Machine) textNumber(op byte) error {
	b, err := m.r.line()
	if err != nil {
		return err
	}
	s := string(b)
	switch op {
	case opFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return m.fail("bad FLOAT %q", s)
		}
		return m.push(Value{Kind: Float, Num: int64(math.Float64bits(f))})
	case opInt:
		switch s {
		case "00":
			return m.push(Value{Kind: Bool})
		case "01":
			return m.push(Value{Kind: Bool, Num: 1})
		}
	case opLong:
		if n := len(s); n > 0 && s[n-1] == 'L' {
			s = s[:n-1]
		}
	}
	bi, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return m.fail("bad integer %q", s)
	}
	if bi.IsInt64() {
		return m.push(Value{Kind: Int, Num: bi.Int64()})
	}
	return m.push(Value{Kind: BigInt, Ref: bi})
}

// decodeLong reads a little-endian two's-complement integer (LONG1/LONG4).
func decodeLong(b []byte) Value {
	if len(b) == 0 {
		return Value{Kind: Int}
	}
	if len(b) <= 8 {
		var u uint64
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := uint(64 - 8*len(b))
		return Value{Kind: Int, Num: int64(u<<shift) >> shift}
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	bi := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		bi.Sub(bi, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if bi.IsInt64() {
		return Value{Kind: Int, Num: bi.Int64()}
	}
	return Value{Kind: BigInt, Ref: bi}
}
