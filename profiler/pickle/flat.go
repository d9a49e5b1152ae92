package pickle

import "encoding/binary"

// A flat dict is what a snapshot holds millions of: EMPTY_DICT, an optional
// MEMOIZE, MARK, then key/value pairs whose keys are memoised strings and whose
// values are numbers, None, booleans, short strings or memoised objects, then
// SETITEMS. OnFlatDict lets a caller take such a dict straight from the input
// bytes, item by item, instead of having it built on the stack — the caller
// claims the list being filled by setting its Tag. The machine offers a dict
// only when it is the next item of a claimed list and no item built the slow
// way is waiting in the same batch, so items reach the caller in order.

// FlatFunc receives the pairs of one flat dict, in order. It must not keep vs.
// A list among the values may be the same *List in several calls (empty, or
// equal items read from the same lasting memo slots): the callee must not
// change it, except to cache in Mark what depends only on the items, and it
// shows the list as it is now (should the pickle append to that list later,
// after reading it back from the memo, a copy takes the items).
type FlatFunc func(list *List, keys []string, vs []Value) error

const maxFlatPairs = 32

type flatPending struct {
	keys    [maxFlatPairs]string
	vals    [maxFlatPairs]Value
	gets    [4 * maxFlatPairs]uint64 // memo reads that need bookkeeping
	n, nget int
	memos   int // MEMOIZEs of values never read back
	// At most one inline list (a trace entry's frames), its items, and the
	// memo slot it is stored in when read back later (store > 0: slot+1).
	list  *List
	items [maxFlatItems]Value
	nitem int
	store uint64
	// The list's items as bytes (GET APPEND or MARK GET... APPENDS) when every
	// item comes from a memo slot that is never dropped: the key of m.lists.
	key []byte
	hit bool // the list is m.lists[key]
}

const maxFlatItems = 256

// flat tries to decode a flat dict at b[0] (EMPTY_DICT) for a claimed list. It
// returns the bytes consumed, or 0 (with nothing changed) to use the slow path.
// It reads in two steps: the dict's bytes into m.pend (nothing in the machine
// changes yet), then the commit of what the slow path would have done.
func (m *Machine) flat(list *List, b []byte) (int, error) {
	p := &m.pend
	p.n, p.nget, p.memos, p.list, p.nitem, p.store, p.key, p.hit = 0, 0, 0, nil, 0, 0, nil, false
	pos, memoLen, ok := m.flatOpen(b)
	if !ok {
		return 0, nil
	}
	if pos, ok = m.flatPairs(b, pos, memoLen); !ok {
		return 0, nil
	}
	if err := m.flatCommit(list); err != nil {
		return 0, err
	}
	return pos, nil
}

// flatOpen reads the dict's start (EMPTY_DICT, a MEMOIZE of a slot never read
// back, MARK) and returns where its pairs begin and the memo length after it.
func (m *Machine) flatOpen(b []byte) (pos int, memoLen uint64, ok bool) {
	p := &m.pend
	pos = skipFrames(b, 1)
	memoLen = m.memoLen
	if pos < len(b) && b[pos] == opMemoize {
		if !m.unwanted(memoLen) {
			return 0, 0, false // the dict itself is read back later: build it
		}
		memoLen++
		p.memos++
		pos = skipFrames(b, pos+1)
	}
	if pos >= len(b) || b[pos] != opMark {
		return 0, 0, false
	}
	return pos + 1, memoLen, true
}

// flatPairs reads the key/value pairs up to SETITEMS into m.pend and returns
// the position after it. It is the decoder's hot loop (millions of dicts, a
// few pairs each): the common keys and values are read inline, not by calls.
func (m *Machine) flatPairs(b []byte, pos int, memoLen uint64) (int, bool) {
	p := &m.pend
	// The pairs. Each is at most 16 bytes (a LONG_BINGET key, a LONG1 of 8
	// bytes and a MEMOIZE), so with 16 bytes left every argument is in b; a
	// dict cut off closer to the end of the input is left to the slow path.
	n := 0 // pairs so far (p.n is set at the end)
	for {
		if len(b)-pos < 16 {
			return 0, false
		}
		w := binary.LittleEndian.Uint64(b[pos:])
		switch byte(w) {
		case opSetItems:
			p.n = n
			return pos + 1, true
		case opFrame:
			pos = skipFrames(b, pos)
			continue
		}
		if n == maxFlatPairs {
			return 0, false
		}
		// The key: a remembered GET (one compare under a mask), else read.
		if c := &m.keys[n&(maxFlatPairs-1)]; c.n > 0 && w&c.mask == c.bits {
			p.keys[n&(maxFlatPairs-1)] = c.v.Text
			pos += c.n
		} else {
			k, kn := m.flatKey(n, b[pos:])
			if kn == 0 {
				return 0, false
			}
			p.keys[n&(maxFlatPairs-1)] = k
			pos += kn
		}
		if b[pos] == opFrame {
			if pos = skipFrames(b, pos); len(b)-pos < 16 {
				return 0, false
			}
		}
		// The value: the common numbers and remembered GETs inline.
		out := &p.vals[n&(maxFlatPairs-1)]
		w = binary.LittleEndian.Uint64(b[pos:])
		switch byte(w) {
		case opBinInt1:
			*out = Value{Kind: Int, Num: int64(byte(w >> 8))}
			pos += 2
		case opBinInt:
			*out = Value{Kind: Int, Num: int64(int32(uint32(w >> 8)))}
			pos += 5
		case opLong1:
			l := byte(w >> 8)
			if l > 8 {
				return 0, false // not an int64: the slow path makes a big.Int
			}
			shift := 64 - 8*uint(l)
			*out = Value{Kind: Int, Num: int64(binary.LittleEndian.Uint64(b[pos+2:])<<shift) >> shift}
			pos += 2 + int(l)
		case opBinGet, opLongBinGet:
			ways := &m.gets[n&(maxFlatPairs-1)]
			for j := range ways {
				if c := &ways[j]; c.n > 0 && w&c.mask == c.bits {
					*out = c.v
					pos += c.n
					n++
					goto next // a read object is not memoised again
				}
			}
			fallthrough
		default:
			k, memos := m.flatValue(n, b[pos:], memoLen, out)
			if k == 0 {
				return 0, false
			}
			memoLen += uint64(memos)
			p.memos += memos
			pos += k
			n++
			continue
		}
		if b[pos] == opMemoize || b[pos] == opFrame {
			if k := skipFrames(b, pos); k < len(b) && b[k] == opMemoize {
				if !m.unwanted(memoLen) {
					return 0, false
				}
				memoLen++
				p.memos++
				pos = k + 1
			}
		}
		n++
	next:
	}
}

// flatCommit does what the slow path would have done with the dict read into
// m.pend: the memo bookkeeping, the inline list's items, then OnFlatDict.
func (m *Machine) flatCommit(list *List) error {
	p := &m.pend
	m.commitMemo()
	filled := p.list != nil && p.nitem > 0
	if filled {
		if err := m.commitItems(); err != nil {
			return err
		}
	}
	if p.hit && len(p.list.Items) > 0 {
		if err := m.hold(len(p.list.Items)); err != nil {
			return err
		}
	}
	list.Count++
	if err := m.OnFlatDict(list, p.keys[:p.n], p.vals[:p.n]); err != nil {
		return err
	}
	if filled {
		// After OnFlatDict: the copy keeps what it cached in Mark.
		m.remember(p.key, p.list)
	}
	return nil
}

// commitMemo writes the memo slots the dict's MEMOIZEs took (only the inline
// list's, which is read back) and consumes its memo reads.
func (m *Machine) commitMemo() {
	p := &m.pend
	for i := 0; i < p.memos; i++ {
		if p.store == m.memoLen+1 {
			m.memo.set(m.memoLen, Value{Kind: ListKind, Ref: p.list})
		}
		if !m.once {
			m.seen.add(m.memoLen)
		}
		m.memoLen++
	}
	for i := 0; i < p.nget; i++ {
		if m.plan.consume(p.gets[i]) {
			m.memo.del(p.gets[i])
		}
	}
}

// commitItems hands the inline list's items to OnAppend, or keeps them.
func (m *Machine) commitItems() error {
	p := &m.pend
	p.list.Count += int64(p.nitem)
	if m.OnAppend != nil {
		done, err := m.OnAppend(p.list, p.items[:p.nitem])
		if err != nil || done {
			return err
		}
	}
	if err := m.hold(p.nitem); err != nil {
		return err
	}
	p.list.Items = append(p.list.Items, p.items[:p.nitem]...)
	return nil
}

// unwanted reports whether a memo slot about to be written is never read back
// and was never written before (so writing it needs no storing).
func (m *Machine) unwanted(id uint64) bool {
	return id < uint64(len(m.plan.reads)) && m.plan.reads[id] == 0 && (m.once || !m.seen.has(id))
}

// flatKey reads a memoised string key that flat did not find remembered.
// Keys come in the same order, from the same memo slots, entry after entry:
// the key at position i is remembered by its GET bytes while its slot is one
// that is never dropped (and no explicit PUT overwrites slots: see put).
func (m *Machine) flatKey(i int, b []byte) (string, int) {
	v, n, ok := m.flatGet(b)
	if !ok || v.Kind != Str {
		return "", 0
	}
	m.keys[i] = flatGetCache{}
	if id := memoIndex(b); id < uint64(len(m.plan.reads)) && m.plan.reads[id] == 255 {
		m.keys[i] = rememberGet(b[:n], v)
	}
	return v.Text, n
}

// flatGetCache remembers a GET of a slot that is never dropped by its bytes
// (bits, under mask: 2 or 5 bytes, little-endian) and the value it read.
type flatGetCache struct {
	bits, mask uint64
	n          int // bytes of the GET; 0: nothing cached
	v          Value
}

func rememberGet(get []byte, v Value) flatGetCache {
	var w [8]byte
	copy(w[:], get)
	return flatGetCache{bits: binary.LittleEndian.Uint64(w[:]), mask: 1<<(8*len(get)) - 1, n: len(get), v: v}
}

type flatValCache struct {
	s   string
	set bool
}

func memoIndex(b []byte) uint64 {
	if b[0] == opBinGet {
		return uint64(b[1])
	}
	return uint64(binary.LittleEndian.Uint32(b[1:5]))
}

// flatGet reads BINGET/LONG_BINGET and queues the read's bookkeeping.
func (m *Machine) flatGet(b []byte) (Value, int, bool) {
	var id uint64
	var n int
	switch {
	case len(b) >= 2 && b[0] == opBinGet:
		id, n = uint64(b[1]), 2
	case len(b) >= 5 && b[0] == opLongBinGet:
		id, n = uint64(binary.LittleEndian.Uint32(b[1:5])), 5
	default:
		return Value{}, 0, false
	}
	v, ok := m.memo.get(id)
	if !ok || id >= uint64(len(m.plan.reads)) {
		return Value{}, 0, false
	}
	if m.plan.reads[id] != 255 {
		p := &m.pend
		for i := 0; i < p.nget; i++ {
			if p.gets[i] == id {
				return Value{}, 0, false // read twice in one dict: leave the count to the slow path
			}
		}
		if p.nget == len(p.gets) {
			return Value{}, 0, false
		}
		p.gets[p.nget] = id
		p.nget++
	}
	return v, n, true
}

// flatValue reads one simple value, and an optional MEMOIZE after it, into
// *out; it returns the bytes used (0: not a flat value) and the MEMOIZEs.
func (m *Machine) flatValue(i int, b []byte, memoLen uint64, out *Value) (int, int) {
	if len(b) == 0 {
		return 0, 0
	}
	var n int
	switch b[0] {
	case opBinGet, opLongBinGet:
		// Like keys, values read from never-dropped slots (action names, '')
		// recur at the same position with the same GET bytes: flat tries
		// the remembered ones first, and a miss remembers this one. A few
		// ways per position: the action alternates between alloc and frees.
		var ok bool
		if *out, n, ok = m.flatGet(b); !ok {
			return 0, 0
		}
		if id := memoIndex(b); id < uint64(len(m.plan.reads)) && m.plan.reads[id] == 255 {
			ways := &m.gets[i]
			ways[m.getsNext[i]%uint8(len(ways))] = rememberGet(b[:n], *out)
			m.getsNext[i]++
		}
		return n, 0 // a read object is not memoised again
	case opEmptyList:
		return m.flatList(b, memoLen, out)
	case opShortBinUnicode:
		// The same short string at the same position (compile_context 'N/A')
		// is the same interned string: skip the intern lookup.
		c := &m.vals[i]
		if len(b) >= 2 && len(b) >= 2+int(b[1]) && c.set && string(b[2:2+int(b[1])]) == c.s {
			*out, n = Value{Kind: Str, Text: c.s}, 2+int(b[1])
			break
		}
		if *out, n = m.scalar(b); n == 0 {
			return 0, 0
		}
		if len(out.Text) <= 64 {
			*c = flatValCache{s: out.Text, set: true}
		}
	default:
		if *out, n = m.scalar(b); n == 0 {
			return 0, 0
		}
	}
	if k := skipFrames(b, n); k < len(b) && b[k] == opMemoize {
		if !m.unwanted(memoLen) {
			return 0, 0
		}
		return k + 1, 1
	}
	return n, 0
}

// emptyList stands for every empty list of a flat dict: the callee cannot
// tell it apart from another empty list, and a memo slot that keeps it hands
// the slow path a copy (see List.shared).
var emptyList = &List{shared: true}

// flatList reads an inline list of memoised objects: EMPTY_LIST, an optional
// MEMOIZE, then nothing, GET APPEND, or MARK GET... APPENDS.
func (m *Machine) flatList(b []byte, memoLen uint64, out *Value) (int, int) {
	p := &m.pend
	if p.list != nil {
		return 0, 0
	}
	n, memos := skipFrames(b, 1), 0
	if n < len(b) && b[n] == opMemoize {
		if memoLen >= uint64(len(m.plan.reads)) || !m.once && m.seen.has(memoLen) {
			return 0, 0
		}
		if m.plan.reads[memoLen] != 0 {
			p.store = memoLen + 1 // read back later (a free entry's frames): keep it
		}
		n, memos = skipFrames(b, n+1), 1
	}
	if end := getRun(b, n); end > 0 {
		if c, ok := m.lists[string(b[n:end])]; ok {
			// The same lasting items as an earlier list: that list, as
			// OnAppend left it, with no item read again. A memo slot may
			// keep it too: the slow path reads a copy (see List.shared).
			p.list = c
			p.hit = true
			*out = Value{Kind: ListKind, Ref: p.list}
			return end, memos
		}
		p.key = b[n:end]
	}
	nget := p.nget
	switch {
	case n < len(b) && b[n] == opMark:
		n++
		for {
			if n = skipFrames(b, n); n >= len(b) {
				return 0, 0
			}
			if b[n] == opAppends {
				n++
				break
			}
			v, k, ok := m.flatGet(b[n:])
			if !ok || p.nitem == maxFlatItems {
				return 0, 0
			}
			p.items[p.nitem] = v
			p.nitem++
			n += k
		}
	case n < len(b) && (b[n] == opBinGet || b[n] == opLongBinGet):
		v, k, ok := m.flatGet(b[n:])
		if !ok {
			return 0, 0
		}
		if k = skipFrames(b, n+k); k >= len(b) || b[k] != opAppend {
			return 0, 0
		}
		p.items[0], p.nitem = v, 1
		n = k + 1
	}
	if p.nitem == 0 {
		if p.store != 0 {
			p.list = emptyList // stored, and so the one inline list of this dict
		}
		*out = Value{Kind: ListKind, Ref: emptyList}
		return n, memos
	}
	if p.nget != nget {
		p.key = nil // an item read from a slot that will be dropped
	}
	p.list = &List{}
	*out = Value{Kind: ListKind, Ref: p.list}
	return n, memos
}

// getRun measures the items of an inline list at b[n:]: GET APPEND or MARK
// GET... APPENDS, without FRAMEs. It returns their end, or 0.
func getRun(b []byte, n int) int {
	k, mark := n, false
	if k < len(b) && b[k] == opMark {
		k, mark = k+1, true
	}
	start := k
	for k < len(b) {
		switch b[k] {
		case opBinGet:
			k += 2
			continue
		case opLongBinGet:
			k += 5
			continue
		case opAppends:
			if mark && k > start {
				return k + 1
			}
		case opAppend:
			if !mark && k > start && (b[start] == opBinGet && k == start+2 || b[start] == opLongBinGet && k == start+5) {
				return k + 1
			}
		}
		return 0
	}
	return 0
}

// The list cache holds at most this many bytes of keys.
const maxListCache = 4 << 20

// remember keeps a snapshot of a list just filled from lasting items (key),
// unless OnAppend claimed it (Tag) and so may need to see each one.
func (m *Machine) remember(key []byte, l *List) {
	if key == nil || l.Tag != nil || m.listBytes+len(key) > maxListCache {
		return
	}
	if m.lists == nil {
		m.lists = map[string]*List{}
	}
	c := *l
	c.Items = c.Items[:len(c.Items):len(c.Items)] // a copy that appends never writes through
	c.shared = true
	m.lists[string(key)] = &c
	m.listBytes += len(key)
}

// skipFrames steps over FRAME opcodes at b[pos:]: protocol 4 starts a new
// frame every 64 KiB, between any two opcodes.
func skipFrames(b []byte, pos int) int {
	for pos < len(b) && b[pos] == opFrame {
		if pos+9 > len(b) {
			return len(b)
		}
		pos += 9
	}
	return pos
}
