package torchsnap

import (
	"bytes"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
)

func byteReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Tags the decoder leaves on pickle containers to remember what it made of them.
type (
	traceTag  int                // a device trace list: its trace number
	stackTag  profiler.StackID   // a frames list already interned
	frameTag  profiler.FrameID   // a frame dict already interned
	framesTag []profiler.FrameID // a frames list kept as interned frames, stack not yet interned
)

type decoder struct {
	frames  *profiler.Frames
	onEvent EventFunc
	traces  []int64 // events per trace
	ev      profiler.Event
	ids     []profiler.FrameID
}

func newDecoder(frames *profiler.Frames, onEvent EventFunc) *decoder {
	return &decoder{frames: frames, onEvent: onEvent}
}

// onAppend streams trace entries: a list whose items are dicts with an
// "action" key is a device trace; its entries become events and are dropped.
func (d *decoder) onAppend(m *pickle.Machine) func(*pickle.List, []pickle.Value) (bool, error) {
	return func(l *pickle.List, items []pickle.Value) (bool, error) {
		if ft, ok := l.Tag.(framesTag); ok || (l.Tag == nil && len(l.Items) == 0 && isFrame(items[0])) {
			return d.appendFrames(l, ft, items)
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
			if d.onEvent != nil {
				if err := d.onEvent(int(tag), &d.ev); err != nil {
					return false, err
				}
			}
			m.Release(dict)
		}
		return true, nil
	}
}

// appendFrames keeps a frames list as interned frame IDs instead of values.
func (d *decoder) appendFrames(l *pickle.List, ft framesTag, items []pickle.Value) (bool, error) {
	for _, it := range items {
		id, err := d.frame(it)
		if err != nil {
			return false, err
		}
		ft = append(ft, id)
	}
	l.Tag = ft
	return true, nil
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

// event fills d.ev from one trace entry dict.
func (d *decoder) event(dict *pickle.Dict, seq int64) error {
	e := &d.ev
	*e = profiler.Event{Seq: seq}
	var haveAction bool
	for i := 0; i+1 < len(dict.Items); i += 2 {
		k, v := dict.Items[i], dict.Items[i+1]
		if k.Kind != pickle.Str {
			continue
		}
		var ok bool
		switch k.Text {
		case "action":
			var s string
			s, ok = v.AsString()
			e.Action, haveAction = profiler.ParseAction(s), ok
		case "addr":
			e.Addr, ok = v.AsUint()
		case "size":
			e.Size, ok = v.AsUint()
		case "stream":
			e.Stream, ok = v.AsInt()
			ok = ok || v.Kind == pickle.None
		case "time_us":
			e.TimeUS, ok = v.AsInt()
			ok = ok || v.Kind == pickle.None
		case "device_free":
			e.DeviceFree, ok = v.AsUint()
		case "user_metadata":
			e.UserMeta, _ = v.AsString()
			ok = true
		case "frames":
			var err error
			e.Stack, err = d.stack(v)
			if err != nil {
				return err
			}
			ok = true
		default:
			ok = true // compile_context and keys added by later PyTorch versions
		}
		if !ok {
			return fmt.Errorf("%q is a %s", k.Text, v.TypeName())
		}
	}
	if !haveAction {
		return fmt.Errorf("no \"action\" string")
	}
	return nil
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
		switch t := l.Tag.(type) {
		case stackTag:
			return profiler.StackID(t), nil
		case framesTag:
			s := d.frames.Stack(t)
			l.Tag = stackTag(s)
			return s, nil
		}
	}
	items, _ := v.Items()
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
		l.Tag = stackTag(s)
	}
	return s, nil
}

func (d *decoder) frame(v pickle.Value) (profiler.FrameID, error) {
	if v.Kind != pickle.DictKind {
		return 0, fmt.Errorf("a frame is a %s, not a dict", v.TypeName())
	}
	dict := v.Ref.(*pickle.Dict)
	if t, ok := dict.Tag.(frameTag); ok {
		return profiler.FrameID(t), nil
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
	dict.Tag = frameTag(id)
	return id, nil
}
