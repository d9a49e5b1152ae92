package marshal

import (
	"fmt"
	"io"
	"unsafe"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// maxKeys bounds the dict keys written through pickle.Writer.Key, which
// writes each distinct key once for the whole pickle (as CPython does for
// interned keys) but remembers every one.
const maxKeys = 4096

// Transcode reads a VSM1 stream from src and writes the snapshot it
// represents to dst as a protocol-4 pickle, streamed: one frame is held at a
// time. An object a frame holds several times is written once and read back
// with a memo GET afterwards, as pickle.dumps of the original would. It stops
// at the end frame. Frozensets are refused (the writer has no FROZENSET).
func Transcode(src io.Reader, dst io.Writer) error {
	r := NewReader(src, DefaultLimits)
	t := &transcoder{w: pickle.NewWriter(dst), keys: map[string]bool{}, keyAt: map[*byte]strMemo{}}
	for {
		f, err := r.Next()
		if err == io.EOF {
			return t.w.Close()
		}
		if err != nil {
			return err
		}
		t.share(r.Shared())
		if err := t.frame(f); err != nil {
			return fmt.Errorf("%w (in the %q frame at byte %d)", err, f.Kind, f.Offset)
		}
		if err := t.w.Err(); err != nil {
			return err
		}
	}
}

type transcoder struct {
	w    *pickle.Writer
	keys map[string]bool // keys written with Key
	// keyAt finds a key's memo by its bytes' address: the decoder gives every
	// short string one copy for the whole stream, so this is the common case
	// and needs no hashing of the string.
	keyAt map[*byte]strMemo
	// The frame's shared objects: lists and dicts are marked in their Mark
	// (-1: not written yet, else memo+1); strings and the rest are here.
	strs   map[*byte]strMemo
	shared map[ident]pickle.Memo
	traces bool // the device_traces list is open
}

// strMemo is the memo of a string written before, and its length (two
// strings at one address are the same string only if their lengths agree).
type strMemo struct {
	n int
	m pickle.Memo
}

// ident is an object's identity: a container's pointer, a tuple's first
// item, a string's bytes.
type ident struct {
	p unsafe.Pointer
	n int
}

// noMemo marks a shared object not written yet.
const noMemo = pickle.NoMemo

func identity(v pickle.Value) (ident, bool) {
	switch v.Kind {
	case pickle.Str, pickle.Bytes:
		return ident{unsafe.Pointer(unsafe.StringData(v.Text)), len(v.Text)}, len(v.Text) > 0
	case pickle.Tuple:
		items := v.Ref.([]pickle.Value)
		return ident{unsafe.Pointer(unsafe.SliceData(items)), -1}, len(items) > 0
	case pickle.ListKind:
		return ident{unsafe.Pointer(v.Ref.(*pickle.List)), -2}, true
	case pickle.DictKind:
		return ident{unsafe.Pointer(v.Ref.(*pickle.Dict)), -3}, true
	case pickle.SetKind:
		return ident{unsafe.Pointer(v.Ref.(*pickle.Set)), -4}, true
	}
	return ident{}, false
}

// share starts a frame: its shared objects are written once each.
func (t *transcoder) share(objs []pickle.Value) {
	clear(t.shared)
	clear(t.strs)
	for _, v := range objs {
		switch v.Kind {
		case pickle.ListKind:
			v.Ref.(*pickle.List).Mark = -1
		case pickle.DictKind:
			v.Ref.(*pickle.Dict).Mark = -1
		case pickle.Str, pickle.Bytes:
			if t.strs == nil {
				t.strs = map[*byte]strMemo{}
			}
			t.strs[unsafe.StringData(v.Text)] = strMemo{len(v.Text), noMemo}
		default:
			if id, ok := identity(v); ok {
				if t.shared == nil {
					t.shared = map[ident]pickle.Memo{}
				}
				t.shared[id] = noMemo
			}
		}
	}
}

func (t *transcoder) frame(f Frame) error {
	w := t.w
	switch f.Kind {
	case KindHeader:
		w.BeginDict()
		return t.pairs(f.Value.Ref.(*pickle.Dict).Items)
	case KindDevice:
		if !t.traces {
			w.Key("device_traces")
			w.BeginList()
			t.traces = true
		} else {
			w.EndList()
		}
		w.BeginList()
	case KindChunk:
		for _, it := range f.Value.Ref.(*pickle.List).Items {
			if err := t.value(it); err != nil {
				return err
			}
		}
	case KindEnd:
		if !t.traces {
			w.Key("device_traces")
			w.BeginList()
		} else {
			w.EndList()
		}
		w.EndList()
		w.EndDict()
	}
	return nil
}

func (t *transcoder) pairs(items []pickle.Value) error {
	for i, it := range items {
		if i%2 == 0 && it.Kind == pickle.Str && t.key(it.Text) {
			continue
		}
		if err := t.value(it); err != nil {
			return err
		}
	}
	return nil
}

// key writes a dict key once for the whole pickle and as a GET after, for
// the first maxKeys distinct keys; it reports false for the others.
func (t *transcoder) key(k string) bool {
	p := unsafe.StringData(k)
	if c, ok := t.keyAt[p]; ok && c.n == len(k) && t.w.CanGet(c.m) {
		t.w.Get(c.m)
		return true
	}
	if !t.keys[k] && len(t.keys) >= maxKeys {
		return false
	}
	t.keys[k] = true
	if len(t.keyAt) >= maxKeys {
		clear(t.keyAt)
	}
	t.keyAt[p] = strMemo{len(k), t.w.Key(k)}
	return true
}

// value writes v; a shared object the second time is a GET.
func (t *transcoder) value(v pickle.Value) error {
	switch v.Kind {
	case pickle.ListKind:
		l := v.Ref.(*pickle.List)
		return t.marked(&l.Mark, v)
	case pickle.DictKind:
		m := v.Ref.(*pickle.Dict)
		return t.marked(&m.Mark, v)
	case pickle.Str, pickle.Bytes:
		if len(t.strs) == 0 || len(v.Text) == 0 {
			break
		}
		p := unsafe.StringData(v.Text)
		c, ok := t.strs[p]
		if !ok || c.n != len(v.Text) {
			break
		}
		if c.m != noMemo {
			return t.get(c.m)
		}
		m, err := t.write(v)
		t.strs[p] = strMemo{c.n, m}
		return err
	case pickle.Tuple, pickle.SetKind:
		id, ok := identity(v)
		if !ok {
			t.w.BeginTuple() // ()
			t.w.EndTuple()
			return nil
		}
		m, shared := t.shared[id]
		if shared && m != noMemo {
			return t.get(m)
		}
		m, err := t.write(v)
		if shared {
			t.shared[id] = m
		}
		return err
	default:
		t.w.Value(v) // a number or None
		return nil
	}
	_, err := t.write(v) // a string written once
	return err
}

// marked writes a list or dict whose Mark says whether it is shared (-1),
// written before (memo+1) or neither (0).
func (t *transcoder) marked(mark *int64, v pickle.Value) error {
	if *mark > 0 {
		return t.get(pickle.Memo(*mark - 1))
	}
	shared := *mark < 0
	m, err := t.write(v)
	if shared {
		*mark = int64(m) + 1
	}
	return err
}

func (t *transcoder) get(m pickle.Memo) error {
	if !t.w.CanGet(m) {
		return fmt.Errorf("more than 2^32 objects in the pickle: past LONG_BINGET's reach")
	}
	t.w.Get(m)
	return nil
}

func (t *transcoder) write(v pickle.Value) (pickle.Memo, error) {
	w := t.w
	switch v.Kind {
	case pickle.Str:
		return w.Str(v.Text), nil
	case pickle.Bytes:
		return w.Bytes([]byte(v.Text)), nil
	case pickle.Tuple:
		w.BeginTuple()
		if err := t.values(v.Ref.([]pickle.Value)); err != nil {
			return noMemo, err
		}
		return w.EndTuple(), nil
	case pickle.ListKind:
		m := w.BeginList()
		err := t.values(v.Ref.(*pickle.List).Items)
		w.EndList()
		return m, err
	case pickle.DictKind:
		m := w.BeginDict()
		err := t.pairs(v.Ref.(*pickle.Dict).Items)
		w.EndDict()
		return m, err
	}
	budget := setBudget
	if err := checkSet(v, &budget); err != nil {
		return noMemo, err
	}
	before := w.Memos()
	w.Value(v)
	return pickle.Memo(before), nil
}

func (t *transcoder) values(items []pickle.Value) error {
	for _, it := range items {
		if err := t.value(it); err != nil {
			return err
		}
	}
	return nil
}

// setBudget bounds the objects a set may expand to: pickle.Writer writes a
// set's items without memo, so tuples shared inside it are written out again.
const setBudget = 1 << 16

// checkSet refuses a set that holds a frozenset (its items are hashable:
// numbers, strings, tuples and frozensets) or expands past setBudget.
func checkSet(v pickle.Value, budget *int) error {
	if *budget--; *budget < 0 {
		return fmt.Errorf("a set of more than %d objects, counting shared tuples each time", setBudget)
	}
	switch v.Kind {
	case pickle.SetKind:
		if v.Ref.(*pickle.Set).Frozen {
			return fmt.Errorf("a frozenset: the pickle writer has no FROZENSET")
		}
	case pickle.Tuple:
	default:
		return nil
	}
	items, _ := v.Items()
	for _, it := range items {
		if err := checkSet(it, budget); err != nil {
			return err
		}
	}
	return nil
}
