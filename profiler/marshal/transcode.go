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
	t := &transcoder{w: pickle.NewWriter(dst), keys: map[string]bool{}}
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
	w      *pickle.Writer
	keys   map[string]bool // keys written with Key
	shared map[ident]pickle.Memo
	traces bool // the device_traces list is open
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
	for _, v := range objs {
		if id, ok := identity(v); ok {
			if t.shared == nil {
				t.shared = map[ident]pickle.Memo{}
			}
			t.shared[id] = noMemo
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
		var err error
		if k := it.Text; i%2 == 0 && it.Kind == pickle.Str && (t.keys[k] || len(t.keys) < maxKeys) {
			t.keys[k] = true
			t.w.Key(k)
		} else {
			err = t.value(it)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// value writes v; a shared object the second time is a GET.
func (t *transcoder) value(v pickle.Value) error {
	id, ok := identity(v)
	if !ok {
		if v.Kind == pickle.Tuple { // ()
			t.w.BeginTuple()
			t.w.EndTuple()
			return nil
		}
		t.w.Value(v) // a number, None, or an empty string
		return nil
	}
	m, shared := t.shared[id]
	if shared && m != noMemo {
		if !t.w.CanGet(m) {
			return fmt.Errorf("more than 2^32 objects in the pickle: past LONG_BINGET's reach")
		}
		t.w.Get(m)
		return nil
	}
	m, err := t.write(v)
	if shared {
		t.shared[id] = m
	}
	return err
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
