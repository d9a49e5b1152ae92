package pickle

// memoTable holds the memo slots still to be read. Low slots (where a pickler
// puts dict keys and other early, much-read objects) live in an array; the rest
// in a map that Plan-driven deletion keeps small.
type memoTable struct {
	low     []Value
	lowUsed []bool
	high    map[uint64]Value
}

const memoLow = 1 << 16

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
	v, ok := t.high[id]
	return v, ok
}

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
	t.high[id] = v
}

func (t *memoTable) del(id uint64) {
	if id < memoLow {
		if id < uint64(len(t.low)) {
			t.low[id], t.lowUsed[id] = Value{}, false
		}
		return
	}
	delete(t.high, id)
}
