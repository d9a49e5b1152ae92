package marshal

import (
	"encoding/binary"
	"errors"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// DecodeList decodes a payload that holds one list and hands each item to each,
// in order, without building the list: a chunk of 50,000 trace entries costs
// no 50,000 dicts. It decodes on a second goroutine, a batch of entries ahead
// of each, which runs on the caller's.
//
// Items are lent: an item that is a dict, and the lists and dicts inside it
// that nothing else can refer to (no FLAG_REF on them or around them), are
// refilled with later items once each has returned, so each must keep none
// of them; the strings and numbers in them, and objects that can be referred
// to, it may keep. each's error stops the decoding and is returned as is.
//
// Python marks every entry as a possible reference target (the chunk is a
// slice, so each entry has two owners), but no entry is referred to again. If
// one is, the payload is decoded again whole and each receives the remaining
// items from that tree.
func (d *Decoder) DecodeList(b []byte, base int64, each func(pickle.Value) error) error {
	if d.batches == nil {
		d.batches = make(chan *batch, nbatches)
		for range nbatches {
			d.batches <- &batch{}
		}
	}
	full := make(chan *batch, nbatches)
	stop := make(chan struct{})
	go d.produce(b, base, full, stop)
	var err error
	for bt := range full {
		if err == nil {
			for _, it := range bt.items {
				if err = each(it); err != nil {
					close(stop)
					break
				}
			}
			if err == nil {
				err = bt.err
			}
		}
		d.batches <- bt
	}
	return err
}

const (
	nbatches  = 3   // one decoding, one being handed out, one waiting
	batchSize = 256 // entries
)

// batch is a run of items and the storage lent to them.
type batch struct {
	items []pickle.Value
	err   error // the decoding stopped after items
	store lending
}

// errLent: a reference to a dict lent out in an earlier batch.
var errLent = errors.New("marshal: reference to a lent dict")

// errStopped: the consumer stopped.
var errStopped = errors.New("marshal: stopped")

// produce decodes the list into batches on full, taking empty batches from
// d.batches, and closes full when done.
func (d *Decoder) produce(b []byte, base int64, full chan<- *batch, stop <-chan struct{}) {
	defer close(full)
	var bt *batch
	next := func() bool {
		if bt != nil {
			full <- bt
		}
		select {
		case bt = <-d.batches:
			bt.items, bt.err = bt.items[:0], nil
			bt.store.reset()
			return true
		case <-stop:
			bt = nil
			return false
		}
	}
	if !next() {
		return
	}
	n, err := d.streamList(b, base, &bt, next)
	if err == errLent {
		// Decode the payload whole and hand out what is left from the tree.
		var v pickle.Value
		if v, err = d.Decode(b, base); err == nil {
			for _, it := range v.Ref.(*pickle.List).Items[n:] {
				if len(bt.items) == batchSize && !next() {
					return
				}
				bt.items = append(bt.items, it)
			}
		}
	}
	if err == errStopped {
		return
	}
	bt.err = err
	full <- bt
}

// streamList is DecodeList's single pass; it returns how many items it
// decoded (into *bt, calling next for a new batch when one is full).
func (d *Decoder) streamList(b []byte, base int64, bt **batch, next func() bool) (int, error) {
	d.reset(b, base)
	defer func() { d.buf, d.store = nil, nil }()
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
		if len((*bt).items) == batchSize && !next() {
			return i, errStopped
		}
		d.store = &(*bt).store
		v, err := d.item()
		if err != nil {
			return i, err
		}
		(*bt).items = append((*bt).items, v)
	}
	return n, d.end()
}

// item reads one item of a streamed list; a dict is lent.
func (d *Decoder) item() (pickle.Value, error) {
	at := d.pos
	if at >= len(d.buf) || d.buf[at]&^flagRef != '{' {
		return d.value()
	}
	d.pos++
	deep, err := d.open(at)
	if err != nil {
		return pickle.Value{}, err
	}
	idx := -1
	if d.buf[at]&flagRef != 0 {
		idx = len(d.refs)
		d.refs = append(d.refs, slot{v: pickle.Value{Kind: pickle.DictKind}})
	}
	entry := d.store.entry()
	d.lend = true
	entry.Items, err = d.entryPairs(at, entry.Items)
	d.lend = false
	h := d.close(deep)
	if err != nil {
		return pickle.Value{}, err
	}
	v := pickle.Value{Kind: pickle.DictKind, Ref: entry}
	if idx >= 0 {
		d.refs[idx] = slot{v: v, height: h, done: true, lent: true}
	}
	return v, nil
}

// entryPairs is pairs for a lent entry's items, with references (every key
// but a chunk's first few) read inline.
func (d *Decoder) entryPairs(at int, items []pickle.Value) ([]pickle.Value, error) {
	for {
		if d.pos >= len(d.buf) {
			return items, d.fail(at, "the payload ends inside a dict")
		}
		if d.buf[d.pos]&^flagRef == '0' {
			d.pos++
			return items, nil
		}
		kat := d.pos
		var k pickle.Value
		var err error
		if s := d.refAt(kat); s != nil {
			k = s.v
		} else if k, err = d.value(); err != nil {
			return items, err
		}
		if k.Kind >= pickle.Tuple && !d.hashable(k) {
			return items, d.fail(kat, "an unhashable %s as a dict key", k.TypeName())
		}
		if d.pos < len(d.buf) && d.buf[d.pos]&^flagRef == '0' {
			return items, d.fail(d.pos, "a dict key with no value")
		}
		items = append(items, k, pickle.Value{})
		if err := d.read(&items[len(items)-1]); err != nil {
			return items, err
		}
	}
}

// refAt is value's fast path for a reference at p (nil: take the slow one).
func (d *Decoder) refAt(p int) *slot {
	b := d.buf
	if p+5 > len(b) || b[p] != 'r' {
		return nil
	}
	n := binary.LittleEndian.Uint32(b[p+1:])
	if uint64(n) >= uint64(len(d.refs)) {
		return nil
	}
	s := &d.refs[n]
	if !s.done || s.lent || d.depth+s.height > d.lim.MaxDepth {
		return nil
	}
	s.used = true
	d.pos = p + 5
	d.deep = max(d.deep, d.depth+s.height)
	return s
}

// lending is the storage of a batch's lent objects: the items of lent lists
// and dicts in an arena, their headers in pools, all handed out again when
// the batch is reused.
type lending struct {
	arena      []pickle.Value
	lists      []*pickle.List
	dicts      []*pickle.Dict
	entries    []*pickle.Dict // kept apart: their items are not in the arena
	nl, nd, ne int
}

func (l *lending) reset() {
	l.arena = l.arena[:0]
	l.nl, l.nd, l.ne = 0, 0, 0
}

func (l *lending) entry() *pickle.Dict {
	if l.ne == len(l.entries) {
		l.entries = append(l.entries, &pickle.Dict{})
	}
	l.ne++
	m := l.entries[l.ne-1]
	m.Items, m.Tag, m.Mark = m.Items[:0], nil, 0
	return m
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

// take returns the items above mark in a slice of their own: from the arena
// while lending, else newly allocated.
func (d *Decoder) take(mark int) []pickle.Value {
	if !d.lend {
		return d.pop(mark)
	}
	l := d.store
	n := len(d.stack) - mark
	if cap(l.arena)-len(l.arena) < n {
		// Slices of the old arena stay valid; it goes when they do.
		l.arena = make([]pickle.Value, 0, max(2*cap(l.arena), n, 4096))
	}
	start := len(l.arena)
	l.arena = append(l.arena, d.stack[mark:]...)
	d.drop(mark)
	return l.arena[start:len(l.arena):len(l.arena)]
}

func (d *Decoder) newList(items []pickle.Value) *pickle.List {
	if !d.lend {
		return &pickle.List{Items: items, Count: int64(len(items))}
	}
	l := d.store.list()
	*l = pickle.List{Items: items, Count: int64(len(items))}
	return l
}

func (d *Decoder) newDict(items []pickle.Value) *pickle.Dict {
	if !d.lend {
		return &pickle.Dict{Items: items}
	}
	m := d.store.dict()
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

// sameList reads a lent list of n references: the same bytes in the same
// payload make the same list, so the first one is kept (not lent) and handed
// out again — a stack the consumer has seen (its Mark set) is not read again.
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
