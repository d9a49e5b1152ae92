package pickle

// memoTable holds the memo slots still to be read. Low slots (where a pickler
// puts dict keys and other early, much-read objects) live in an array. Higher
// slots go to a ring indexed by the slot number, where most are read back and
// dropped soon after they are written (a trace entry's stack, read again by
// the next entry, three slots on); a slot still held when a later one needs
// its place moves to a map, which Plan-driven deletion keeps small.
type memoTable struct {
	low     []Value
	lowUsed []bool
	ring    []ringSlot
	high    map[uint64]Value
}

// ringSlot is one place in the ring: slot id+1 (0: empty) and its value.
type ringSlot struct {
	id uint64
	v  Value
}

const (
	memoLow  = 1 << 16
	memoRing = 1 << 10 // a power of two; small enough to stay in cache
)

func newMemoTable() memoTable {
	return memoTable{high: map[uint64]Value{}}
}

func (t *memoTable) get(id uint64) (Value, bool) {
	if id < uint64(len(t.low)) {
		return t.low[id], t.lowUsed[id]
	}
	if id < memoLow {
		return Value{}, false
	}
	if t.ring != nil {
		if r := &t.ring[id&(memoRing-1)]; r.id == id+1 {
			return r.v, true
		}
	}
	if len(t.high) == 0 {
		return Value{}, false
	}
	v, ok := t.high[id]
	return v, ok
}

// set stores a slot that is not stored yet (put deletes a slot before
// writing it again).
func (t *memoTable) set(id uint64, v Value) {
	if id < memoLow {
		for uint64(len(t.low)) <= id {
			n := min(max(2*len(t.low), 256), memoLow)
			t.low = append(t.low, make([]Value, n-len(t.low))...)
			t.lowUsed = append(t.lowUsed, make([]bool, n-len(t.lowUsed))...)
		}
		t.low[id], t.lowUsed[id] = v, true
		return
	}
	if t.ring == nil {
		t.ring = make([]ringSlot, memoRing)
	}
	r := &t.ring[id&(memoRing-1)]
	if r.id != 0 {
		t.high[r.id-1] = r.v // still to be read: make room
	}
	*r = ringSlot{id: id + 1, v: v}
}

func (t *memoTable) del(id uint64) {
	if id < memoLow {
		if id < uint64(len(t.low)) {
			t.low[id], t.lowUsed[id] = Value{}, false
		}
		return
	}
	if t.ring != nil {
		if r := &t.ring[id&(memoRing-1)]; r.id == id+1 {
			*r = ringSlot{}
			return
		}
	}
	if len(t.high) > 0 {
		delete(t.high, id)
	}
}
