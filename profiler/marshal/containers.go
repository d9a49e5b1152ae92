package marshal

import "github.com/vramscope/vramscope/profiler/pickle"

// container reads a tuple, list, dict, set or frozenset. A FLAG_REF container
// takes its slot before its items, as in CPython, and can be referred to only
// once it is complete.
func (d *Decoder) container(at int, code byte, flag bool) (pickle.Value, error) {
	deep, err := d.open(at)
	if err != nil {
		return pickle.Value{}, err
	}
	idx := -1
	lend := d.lend
	if flag {
		idx = len(d.refs)
		d.refs = append(d.refs, slot{v: pickle.Value{Kind: kindOf(code)}})
		d.lend = false // it may be referred to later: nothing in it is lent
	}
	var v pickle.Value
	switch code {
	case '[':
		v, err = d.list(at)
	case '(', ')':
		v, err = d.tuple(at, code == ')')
	case '{':
		v, err = d.dict(at)
	default:
		v, err = d.set(at, code == '>')
	}
	d.lend = lend
	h := d.close(deep)
	if err != nil {
		return pickle.Value{}, err
	}
	if idx >= 0 {
		d.refs[idx] = slot{v: v, height: h, done: true}
	}
	return v, nil
}

// open enters a container: it checks the nesting and returns what close
// needs to work out the container's height.
func (d *Decoder) open(at int) (int, error) {
	if d.depth++; d.depth > d.lim.MaxDepth {
		d.depth--
		return 0, d.fail(at, "containers nested deeper than %d", d.lim.MaxDepth)
	}
	deep := d.deep
	d.deep = d.depth
	return deep, nil
}

// close leaves a container and returns its height: the levels from it to the
// deepest container read (or referred to) inside it.
func (d *Decoder) close(deep int) int {
	h := d.deep - d.depth + 1
	d.depth--
	d.deep = max(deep, d.deep)
	return h
}

func kindOf(code byte) pickle.Kind {
	switch code {
	case '[':
		return pickle.ListKind
	case '{':
		return pickle.DictKind
	case '<', '>':
		return pickle.SetKind
	}
	return pickle.Tuple
}

func (d *Decoder) list(at int) (pickle.Value, error) {
	n, err := d.count(at, false, "list")
	if err != nil {
		return pickle.Value{}, err
	}
	if d.arenas && n > 0 {
		if refs, ok := d.refList(n); ok {
			return d.sameList(refs, n)
		}
	}
	mark := len(d.stack)
	if err := d.push(n, false); err != nil {
		return pickle.Value{}, err
	}
	return pickle.Value{Kind: pickle.ListKind, Ref: d.newList(d.take(mark))}, nil
}

func (d *Decoder) tuple(at int, short bool) (pickle.Value, error) {
	n, err := d.count(at, short, "tuple")
	if err != nil {
		return pickle.Value{}, err
	}
	mark := len(d.stack)
	if err := d.push(n, false); err != nil {
		return pickle.Value{}, err
	}
	items := d.pop(mark)
	for _, it := range items {
		if !d.hashable(it) {
			if d.unhashable == nil {
				d.unhashable = map[*pickle.Value]bool{}
			}
			d.unhashable[&items[0]] = true
			break
		}
	}
	return pickle.Value{Kind: pickle.Tuple, Ref: items}, nil
}

func (d *Decoder) set(at int, frozen bool) (pickle.Value, error) {
	n, err := d.count(at, false, "set")
	if err != nil {
		return pickle.Value{}, err
	}
	mark := len(d.stack)
	if err := d.push(n, true); err != nil {
		return pickle.Value{}, err
	}
	return pickle.Value{Kind: pickle.SetKind, Ref: &pickle.Set{Items: d.pop(mark), Frozen: frozen}}, nil
}

// push reads n values onto the stack (a count is only checked against the
// bytes left, so nothing is allocated for items that are not there); keys:
// they must be hashable.
func (d *Decoder) push(n int, keys bool) error {
	mark := len(d.stack)
	for i := 0; i < n; i++ {
		at := d.pos
		v, err := d.value()
		if err == nil && keys && !d.hashable(v) {
			err = d.fail(at, "an unhashable %s in a set", v.TypeName())
		}
		if err != nil {
			d.drop(mark)
			return err
		}
		d.stack = append(d.stack, v)
	}
	return nil
}

// dict reads key/value pairs up to the '0' that ends them.
func (d *Decoder) dict(at int) (pickle.Value, error) {
	mark := len(d.stack)
	if err := d.pairs(at, &d.stack); err != nil {
		d.drop(mark)
		return pickle.Value{}, err
	}
	return pickle.Value{Kind: pickle.DictKind, Ref: d.newDict(d.take(mark))}, nil
}

// pairs appends a dict's keys and values to *dst (the stack, or a lent
// entry's items).
func (d *Decoder) pairs(at int, dst *[]pickle.Value) error {
	for {
		if d.pos >= len(d.buf) {
			return d.fail(at, "the payload ends inside a dict")
		}
		if d.buf[d.pos]&^flagRef == '0' {
			d.pos++
			return nil
		}
		kat := d.pos
		k, err := d.value()
		if err == nil && k.Kind >= pickle.Tuple && !d.hashable(k) {
			err = d.fail(kat, "an unhashable %s as a dict key", k.TypeName())
		}
		if err == nil && d.pos < len(d.buf) && d.buf[d.pos]&^flagRef == '0' {
			err = d.fail(d.pos, "a dict key with no value")
		}
		var v pickle.Value
		if err == nil {
			v, err = d.value()
		}
		if err != nil {
			return err
		}
		*dst = append(*dst, k, v)
	}
}

func (d *Decoder) pop(mark int) []pickle.Value {
	out := make([]pickle.Value, len(d.stack)-mark)
	copy(out, d.stack[mark:])
	d.drop(mark)
	return out
}

// drop truncates the stack, clearing what it held so the values can go.
func (d *Decoder) drop(mark int) {
	clear(d.stack[mark:])
	d.stack = d.stack[:mark]
}

// hashable reports whether Python could use v as a dict key or set item.
func (d *Decoder) hashable(v pickle.Value) bool {
	switch v.Kind {
	case pickle.ListKind, pickle.DictKind:
		return false
	case pickle.SetKind:
		return v.Ref.(*pickle.Set).Frozen
	case pickle.Tuple:
		items := v.Ref.([]pickle.Value)
		return len(items) == 0 || !d.unhashable[&items[0]]
	}
	return true
}
