package torchsnap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
)

func byteReader(b []byte) io.Reader { return bytes.NewReader(b) }

// traceTag marks a device trace list with its trace number. Frames lists and
// frame dicts remember their interned stack or frame in Mark (ID+1).
type traceTag int

type decoder struct {
	frames  *profiler.Frames
	onEvent EventFunc
	traces  []int64 // events per trace
	ev      profiler.Event
	ids     []profiler.FrameID
	filling filling  // the frames list being filled
	keys    strCache // entry key -> field
	byPos   [32]struct {
		s string
		f int
	}
	actions strCache // action string -> profiler.Action
	lim     limits
}

func newDecoder(frames *profiler.Frames, onEvent EventFunc) *decoder {
	return &decoder{frames: frames, onEvent: onEvent}
}

// onAppend streams trace entries: a list whose items are dicts with an
// "action" key is a device trace; its entries become events and are dropped.
func (d *decoder) onAppend(m *pickle.Machine) func(*pickle.List, []pickle.Value) (bool, error) {
	return func(l *pickle.List, items []pickle.Value) (bool, error) {
		if len(items) == 0 {
			return true, nil // an empty MARK batch: nothing to add
		}
		if l.Mark > 0 || l == d.filling.list || (l.Tag == nil && len(l.Items) == 0 && isFrame(items[0])) {
			return d.appendFrames(l, items)
		}
		tag, ok := l.Tag.(traceTag)
		if !ok {
			if l.Tag != nil || len(l.Items) > 0 || !isTraceEntry(items[0]) {
				return false, nil
			}
			tag = traceTag(len(d.traces))
			d.traces = append(d.traces, 0)
			l.Tag = tag
		}
		for _, it := range items {
			if it.Kind != pickle.DictKind {
				return false, fmt.Errorf("device trace %d: entry %d is a %s, not a dict", tag, d.traces[tag], it.TypeName())
			}
			dict := it.Ref.(*pickle.Dict)
			if err := d.event(dict, d.traces[tag]); err != nil {
				return false, fmt.Errorf("device trace %d, entry %d: %w", tag, d.traces[tag], err)
			}
			d.traces[tag]++
			if err := d.emit(int(tag), &d.ev); err != nil {
				return false, err
			}
			m.Release(dict)
		}
		return true, nil
	}
}

// filling is the frames list being filled, batch by batch (a pickler writes
// a long list in APPENDS of 1,000): its frame IDs gather in ids, and the list
// is interned once, when an entry or block uses it or the next frames list
// begins (so stacks get their IDs in the order their lists end, as in the
// VSM1 path). Interning after every batch made a list of n frames cost n²/1000
// in stacks.
type filling struct {
	list  *pickle.List
	ids   []profiler.FrameID
	dirty bool // ids holds frames the interned stack (list.Mark) lacks
	used  bool // an entry or block took the stack: the list is done
}

// appendFrames takes a batch of a frames list's frames.
func (d *decoder) appendFrames(l *pickle.List, items []pickle.Value) (bool, error) {
	f := &d.filling
	if l != f.list {
		if l.Mark > 0 {
			return false, errGrownStack
		}
		d.endFilling()
		f.list, f.ids, f.used = l, f.ids[:0], false
	} else if f.used {
		return false, errGrownStack
	}
	for _, it := range items {
		id, err := d.frame(it)
		if err != nil {
			return false, err
		}
		f.ids = append(f.ids, id)
	}
	f.dirty = true
	return true, nil
}

// errGrownStack refuses what only a hand-made pickle does: frames added to
// a list after a trace entry took it as its stack (Python's reader would
// show the entry the longer list), or after another frames list began. The
// decoder streams entries and cannot go back to them.
var errGrownStack = errors.New("a frames list gains frames after a trace entry used it, or after another frames list began")

// endFilling interns the list being filled, if it has frames not interned yet.
func (d *decoder) endFilling() {
	if f := &d.filling; f.list != nil && f.dirty {
		f.list.Mark = int64(d.frames.Stack(f.ids)) + 1
		f.dirty = false
	}
}

// useFilling is called before l's stack is read: the list being filled is
// interned and done.
func (d *decoder) useFilling(l *pickle.List) {
	if l == d.filling.list {
		d.endFilling()
		d.filling.used = true
	}
}

func isFrame(v pickle.Value) bool {
	if v.Kind != pickle.DictKind {
		return false
	}
	_, ok := v.Ref.(*pickle.Dict).Get("filename")
	return ok
}

func isTraceEntry(v pickle.Value) bool {
	if v.Kind != pickle.DictKind {
		return false
	}
	_, ok := v.Ref.(*pickle.Dict).Get("action")
	return ok
}

// Fields of a trace entry. Keys are memoised strings, so the same few string
// values recur; a small cache compares them first (equal strings that share
// their bytes compare in constant time).
const (
	fOther = iota
	fAction
	fAddr
	fSize
	fStream
	fTime
	fDeviceFree
	fUserMeta
	fFrames
)

func fieldByName(k string) int {
	switch k {
	case "action":
		return fAction
	case "addr":
		return fAddr
	case "size":
		return fSize
	case "stream":
		return fStream
	case "time_us":
		return fTime
	case "device_free":
		return fDeviceFree
	case "user_metadata":
		return fUserMeta
	case "frames":
		return fFrames
	}
	return fOther // compile_context and keys added by later PyTorch versions
}

// strCache maps the few strings that recur millions of times (entry keys,
// action names) to small ints. They are memoised in the pickle, so the same
// string value — the same bytes — comes back each time: a pointer compare
// finds it. The cache holds the strings, so their bytes cannot be reused.
type strCache struct {
	str [12]string
	val [12]int
	k   int
}

func (c *strCache) lookup(s string, slow func(string) int) int {
	p := unsafe.StringData(s)
	for i := 0; i < c.k; i++ {
		if unsafe.StringData(c.str[i]) == p && len(c.str[i]) == len(s) {
			return c.val[i]
		}
	}
	v := slow(s)
	if c.k < len(c.str) && len(s) > 0 {
		c.str[c.k], c.val[c.k] = s, v
		c.k++
	}
	return v
}

func actionOf(s string) int { return int(profiler.ParseAction(s)) }

// event fills d.ev from one trace entry dict.
func (d *decoder) event(dict *pickle.Dict, seq int64) error {
	d.ev = profiler.Event{Seq: seq}
	haveAction := false
	for i := 0; i+1 < len(dict.Items); i += 2 {
		if k := dict.Items[i]; k.Kind == pickle.Str {
			isAction, err := d.field(k.Text, dict.Items[i+1])
			if err != nil {
				return err
			}
			haveAction = haveAction || isAction
		}
	}
	if !haveAction {
		return fmt.Errorf("no \"action\" string")
	}
	return nil
}

// flatEvent fills d.ev from a trace entry the machine read straight from the
// input (pickle.FlatFunc) and passes it on.
func (d *decoder) flatEvent(l *pickle.List, keys []string, vals []pickle.Value) error {
	tag, ok := l.Tag.(traceTag)
	if !ok {
		return fmt.Errorf("a dict was offered for a list that is not a device trace")
	}
	seq := d.traces[tag]
	d.ev = profiler.Event{Seq: seq}
	e := &d.ev
	haveAction := false
	for i, k := range keys {
		v := &vals[i]
		f := fOther
		if c := &d.byPos[i%len(d.byPos)]; len(c.s) == len(k) && unsafe.StringData(c.s) == unsafe.StringData(k) {
			f = c.f
		} else {
			f = d.fieldOf(i, k)
		}
		// The common kinds inline; set handles the rest and every error.
		switch f {
		case fAction:
			if v.Kind == pickle.Str {
				e.Action = profiler.Action(d.actions.lookup(v.Text, actionOf))
				haveAction = true
				continue
			}
		case fAddr:
			if v.Kind == pickle.Int && v.Num >= 0 {
				e.Addr = uint64(v.Num)
				continue
			}
		case fSize:
			if v.Kind == pickle.Int && v.Num >= 0 {
				e.Size = uint64(v.Num)
				continue
			}
		case fTime:
			if v.Kind == pickle.Int {
				e.TimeUS = v.Num
				continue
			}
		case fStream:
			if v.Kind == pickle.Int {
				e.Stream = v.Num
				continue
			}
		case fUserMeta:
			if v.Kind == pickle.Str {
				e.UserMeta = v.Text
				continue
			}
		case fFrames:
			if l, ok := v.Ref.(*pickle.List); ok && v.Kind == pickle.ListKind {
				d.useFilling(l)
				switch {
				case l.Mark > 0: // interned already
					e.Stack = profiler.StackID(l.Mark - 1)
					continue
				case len(l.Items) == 0:
					e.Stack = 0 // the empty stack
					continue
				}
			}
		case fOther:
			continue
		}
		isAction, err := d.set(f, k, *v)
		if err != nil {
			return fmt.Errorf("device trace %d, entry %d: %w", tag, seq, err)
		}
		haveAction = haveAction || isAction
	}
	if !haveAction {
		return fmt.Errorf("device trace %d, entry %d: no \"action\" string", tag, seq)
	}
	d.traces[tag]++
	return d.emit(int(tag), &d.ev)
}

// emit range-checks an event (limits.go) and passes it on.
func (d *decoder) emit(tag int, e *profiler.Event) error {
	if err := d.lim.checkEvent(tag, e); err != nil {
		return err
	}
	if d.onEvent != nil {
		return d.onEvent(tag, e)
	}
	return nil
}

// fieldOf is the field of the key at position i of a flat entry: entries
// repeat the same key strings in the same order, so position i remembers it
// (flatEvent compares first).
func (d *decoder) fieldOf(i int, k string) int {
	c := &d.byPos[i%len(d.byPos)]
	c.s, c.f = k, d.keys.lookup(k, fieldByName)
	return c.f
}

// field sets one entry field of d.ev; it reports whether it was the action.
func (d *decoder) field(k string, v pickle.Value) (bool, error) {
	return d.set(d.keys.lookup(k, fieldByName), k, v)
}

func (d *decoder) set(f int, k string, v pickle.Value) (bool, error) {
	e := &d.ev
	ok := true
	switch f {
	case fAction:
		if v.Kind != pickle.Str {
			return false, fmt.Errorf("\"action\" is a %s", v.TypeName())
		}
		e.Action = profiler.Action(d.actions.lookup(v.Text, actionOf))
		return true, nil
	case fAddr:
		e.Addr, ok = v.AsUint()
	case fSize:
		e.Size, ok = v.AsUint()
	case fStream:
		e.Stream, ok = v.AsInt()
		ok = ok || v.Kind == pickle.None
	case fTime:
		e.TimeUS, ok = v.AsInt()
		ok = ok || v.Kind == pickle.None
	case fDeviceFree:
		e.DeviceFree, ok = v.AsUint()
	case fUserMeta:
		e.UserMeta, _ = v.AsString()
	case fFrames:
		var err error
		e.Stack, err = d.stack(v)
		return false, err
	}
	if !ok {
		return false, badField(k, v)
	}
	return false, nil
}

// badField says what is wrong with a trace entry's field in plain words: a
// negative size is not "an int" (it is one), it is a negative number.
func badField(k string, v pickle.Value) error {
	if n, isInt := v.AsInt(); isInt && n < 0 {
		return fmt.Errorf("%q is %d: it must not be negative", k, n)
	}
	return fmt.Errorf("%q must be a number, not a %s", k, v.TypeName())
}

// stack interns a frames list, caching the result on the list itself.
func (d *decoder) stack(v pickle.Value) (profiler.StackID, error) {
	if v.Kind == pickle.None {
		return 0, nil
	}
	if v.Kind != pickle.ListKind && v.Kind != pickle.Tuple {
		return 0, fmt.Errorf("frames is a %s, not a list", v.TypeName())
	}
	var l *pickle.List
	if v.Kind == pickle.ListKind {
		l = v.Ref.(*pickle.List)
		d.useFilling(l)
		if l.Mark > 0 {
			return profiler.StackID(l.Mark - 1), nil
		}
	}
	items, _ := v.Items()
	if len(items) == 0 {
		return 0, nil // the empty stack; empty lists may be shared, so nothing is written to them
	}
	ids := d.ids[:0]
	for _, it := range items {
		id, err := d.frame(it)
		if err != nil {
			return 0, err
		}
		ids = append(ids, id)
	}
	d.ids = ids
	s := d.frames.Stack(ids)
	if l != nil {
		l.Mark = int64(s) + 1
	}
	return s, nil
}

func (d *decoder) frame(v pickle.Value) (profiler.FrameID, error) {
	if v.Kind != pickle.DictKind {
		return 0, fmt.Errorf("a frame is a %s, not a dict", v.TypeName())
	}
	dict := v.Ref.(*pickle.Dict)
	if dict.Mark > 0 {
		return profiler.FrameID(dict.Mark - 1), nil
	}
	var f profiler.Frame
	if s, ok := dict.Get("filename"); ok {
		f.File, _ = s.AsString()
	}
	if s, ok := dict.Get("name"); ok {
		f.Func, _ = s.AsString()
	}
	if s, ok := dict.Get("line"); ok {
		n, _ := s.AsInt()
		f.Line = int(n)
	}
	id := d.frames.Frame(f)
	dict.Mark = int64(id) + 1
	return id, nil
}
