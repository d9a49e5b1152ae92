package marshal

// The storage of DecodeEntries: what it reads is put in arenas and pools that
// the next entry or the next payload reuses, so a chunk costs no allocations.

import "github.com/vramscope/vramscope/profiler/pickle"

// lending is the storage of DecodeEntries' lists and dicts: their items in an
// arena, their headers in pools, all handed out again for the next entry (the
// lent ones) or the next payload (the others).
type lending struct {
	arena  []pickle.Value
	lists  []*pickle.List
	dicts  []*pickle.Dict
	nl, nd int
}

func (l *lending) reset() {
	l.arena = l.arena[:0]
	l.nl, l.nd = 0, 0
}

func (l *lending) list() *pickle.List {
	if l.nl == len(l.lists) {
		l.lists = append(l.lists, &pickle.List{})
	}
	l.nl++
	return l.lists[l.nl-1]
}

func (l *lending) dict() *pickle.Dict {
	if l.nd == len(l.dicts) {
		l.dicts = append(l.dicts, &pickle.Dict{})
	}
	l.nd++
	m := l.dicts[l.nd-1]
	m.Tag, m.Mark = nil, 0
	return m
}

// storage is where DecodeEntries keeps what it reads now: the entry's lent
// storage or the payload's; nil outside DecodeEntries (allocate).
func (d *Decoder) storage() *lending {
	switch {
	case !d.arenas:
		return nil
	case d.lend:
		return &d.lent
	}
	return &d.kept
}

// take returns the items above mark in a slice of their own: from an arena
// inside DecodeEntries, else newly allocated.
func (d *Decoder) take(mark int) []pickle.Value {
	l := d.storage()
	if l == nil {
		return d.pop(mark)
	}
	n := len(d.stack) - mark
	if cap(l.arena)-len(l.arena) < n {
		// Slices of the old arena stay valid; it goes when they do.
		l.arena = make([]pickle.Value, 0, max(2*cap(l.arena), n, 256))
	}
	start := len(l.arena)
	l.arena = append(l.arena, d.stack[mark:]...)
	d.drop(mark)
	return l.arena[start:len(l.arena):len(l.arena)]
}

func (d *Decoder) newList(items []pickle.Value) *pickle.List {
	s := d.storage()
	if s == nil {
		return &pickle.List{Items: items, Count: int64(len(items))}
	}
	l := s.list()
	*l = pickle.List{Items: items, Count: int64(len(items))}
	return l
}

func (d *Decoder) newDict(items []pickle.Value) *pickle.Dict {
	s := d.storage()
	if s == nil {
		return &pickle.Dict{Items: items}
	}
	m := s.dict()
	m.Items = items
	return m
}

// refList returns the bytes of the n items of the list starting at d.pos if
// they are all plain references, as a trace entry's stack is (a reference to
// each frame dict).
func (d *Decoder) refList(n int) ([]byte, bool) {
	if n > (len(d.buf)-d.pos)/5 {
		return nil, false
	}
	b := d.buf[d.pos : d.pos+5*n]
	for i := 0; i < len(b); i += 5 {
		if b[i] != 'r' {
			return nil, false
		}
	}
	return b, true
}

// sameList reads a list of n references inside DecodeEntries: the same bytes
// in the same payload make the same list, so the first one is kept (not lent)
// and handed out again — a stack the consumer has seen (its Mark set) is not
// read again.
func (d *Decoder) sameList(refs []byte, n int) (pickle.Value, error) {
	if c, ok := d.lists[string(refs)]; ok {
		if d.depth+c.height-1 > d.lim.MaxDepth {
			return pickle.Value{}, d.fail(d.pos, "a list nests deeper than %d", d.lim.MaxDepth)
		}
		d.pos += len(refs)
		d.deep = max(d.deep, d.depth+c.height-1)
		return c.v, nil
	}
	d.lend = false // the container restores it
	mark := len(d.stack)
	if err := d.push(n, false); err != nil {
		return pickle.Value{}, err
	}
	v := pickle.Value{Kind: pickle.ListKind, Ref: d.newList(d.take(mark))}
	if d.lists == nil {
		d.lists = map[string]slot{}
	}
	d.lists[string(refs)] = slot{v: v, height: d.deep - d.depth + 1}
	return v, nil
}
