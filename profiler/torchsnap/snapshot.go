package torchsnap

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// finish converts what was not streamed: segments, annotations, settings, and
// which device each streamed trace belongs to.
func (d *decoder) finish(root pickle.Value) (*Snapshot, error) {
	s := &Snapshot{Frames: d.frames, TraceEvents: d.traces, TraceDevices: make([]int, len(d.traces))}
	for i := range s.TraceDevices {
		s.TraceDevices[i] = i
	}
	var segs pickle.Value
	switch root.Kind {
	case pickle.ListKind: // torch 1.x memory_snapshot(): a bare list of segments
		segs = root
	case pickle.DictKind:
		dict := root.Ref.(*pickle.Dict)
		var ok bool
		segs, ok = dict.Get("segments")
		traces, hasTraces := dict.Get("device_traces")
		if !ok && !hasTraces {
			return nil, fmt.Errorf("not a PyTorch memory snapshot: the top-level dict has no \"segments\" or \"device_traces\" (keys: %s)", keyList(dict))
		}
		if hasTraces {
			if err := d.traceDevices(s, traces); err != nil {
				return nil, err
			}
		}
		if v, ok := dict.Get("external_annotations"); ok {
			var err error
			if s.Annotations, err = d.annotations(v); err != nil {
				return nil, err
			}
		}
		if v, ok := dict.Get("allocator_settings"); ok {
			s.Settings = settings(v)
		}
		if v, ok := dict.Get("vramscope_tensors"); ok {
			var err error
			if s.Tensors, err = tensorNames(v); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("not a PyTorch memory snapshot: the pickle holds a %s", root.TypeName())
	}
	if segs.Kind != pickle.None || root.Kind == pickle.ListKind {
		items, ok := segs.Items()
		if !ok {
			return nil, fmt.Errorf("\"segments\" is a %s, not a list", segs.TypeName())
		}
		for i, it := range items {
			seg, legacy, err := d.segment(it)
			if err != nil {
				return nil, fmt.Errorf("segment %d: %w", i, err)
			}
			if err := d.lim.checkSegment(&seg); err != nil {
				return nil, fmt.Errorf("segment %d: %w", i, err)
			}
			s.Legacy = s.Legacy || legacy
			s.Segments = append(s.Segments, seg)
		}
	}
	return s, nil
}

func keyList(d *pickle.Dict) string {
	var keys []string
	for i := 0; i < len(d.Items) && len(keys) < 8; i += 2 {
		keys = append(keys, keyName(d.Items[i]))
	}
	return fmt.Sprint(keys)
}

// traceDevices maps each streamed trace to its position in device_traces.
func (d *decoder) traceDevices(s *Snapshot, v pickle.Value) error {
	items, ok := v.Items()
	if !ok {
		return fmt.Errorf("\"device_traces\" is a %s, not a list", v.TypeName())
	}
	for dev, it := range items {
		if it.Kind != pickle.ListKind {
			return fmt.Errorf("device_traces[%d] is a %s, not a list", dev, it.TypeName())
		}
		l := it.Ref.(*pickle.List)
		if tag, ok := l.Tag.(traceTag); ok {
			if err := checkDevice("device_traces", int64(dev)); err != nil {
				return fmt.Errorf("device_traces[%d] holds entries: %w", dev, err)
			}
			s.TraceDevices[tag] = dev
		} else if len(l.Items) > 0 {
			return fmt.Errorf("device_traces[%d] holds %ss, not trace entries", dev, l.Items[0].TypeName())
		}
	}
	return nil
}

func (d *decoder) segment(v pickle.Value) (profiler.Segment, bool, error) {
	var seg profiler.Segment
	if v.Kind != pickle.DictKind {
		return seg, false, fmt.Errorf("a %s, not a dict", v.TypeName())
	}
	dict := v.Ref.(*pickle.Dict)
	seg.Device = int(getInt(dict, "device"))
	seg.Addr = getUint(dict, "address")
	seg.TotalSize = getUint(dict, "total_size")
	seg.Allocated = getUint(dict, "allocated_size")
	seg.Active = getUint(dict, "active_size")
	seg.Requested = getUint(dict, "requested_size")
	seg.Stream = getInt(dict, "stream")
	seg.Type = getString(dict, "segment_type")
	if b, ok := dict.Get("is_expandable"); ok {
		seg.Expandable, _ = b.AsBool()
	}
	if p, ok := dict.Get("segment_pool_id"); ok {
		if items, ok := p.Items(); ok && len(items) == 2 {
			seg.PoolID[0], _ = items[0].AsInt()
			seg.PoolID[1], _ = items[1].AsInt()
		}
	}
	blocks, _ := dict.Get("blocks")
	items, _ := blocks.Items()
	legacy := false
	addr := seg.Addr
	for i, it := range items {
		b, isLegacy, err := d.block(it, addr)
		if err != nil {
			return seg, false, fmt.Errorf("block %d: %w", i, err)
		}
		legacy = legacy || isLegacy
		addr = b.Addr + b.Size
		seg.Blocks = append(seg.Blocks, b)
	}
	return seg, legacy, nil
}

// block reads one block. Blocks before PyTorch 2.1 had no address (it follows
// from the previous block's end) and kept their stack in a "history" list.
func (d *decoder) block(v pickle.Value, next uint64) (profiler.Block, bool, error) {
	var b profiler.Block
	if v.Kind != pickle.DictKind {
		return b, false, fmt.Errorf("a %s, not a dict", v.TypeName())
	}
	dict := v.Ref.(*pickle.Dict)
	b.Addr = next
	if a, ok := dict.Get("address"); ok {
		b.Addr, _ = a.AsUint()
	}
	b.Size = getUint(dict, "size")
	req, hasReq := dict.Get("requested_size")
	b.Requested, _ = req.AsUint()
	b.State = profiler.ParseBlockState(getString(dict, "state"))
	var err error
	if fr, ok := dict.Get("frames"); ok {
		if b.Stack, err = d.stack(fr); err != nil {
			return b, false, err
		}
	}
	h, ok := dict.Get("history")
	if !ok {
		if !hasReq {
			b.Requested = b.Size
		}
		return b, false, nil
	}
	hist, _ := h.Items()
	if len(hist) > 0 && hist[0].Kind == pickle.DictKind {
		last := hist[0].Ref.(*pickle.Dict)
		if b.Requested == 0 {
			b.Requested = getUint(last, "real_size")
		}
		if fr, ok := last.Get("frames"); ok && b.Stack == 0 {
			if b.Stack, err = d.stack(fr); err != nil {
				return b, true, err
			}
		}
	}
	return b, true, nil
}

func (d *decoder) annotations(v pickle.Value) ([]profiler.Annotation, error) {
	items, _ := v.Items()
	var out []profiler.Annotation
	for i, it := range items {
		if it.Kind != pickle.DictKind {
			continue
		}
		dict := it.Ref.(*pickle.Dict)
		a := profiler.Annotation{
			Name:   getString(dict, "name"),
			Start:  getString(dict, "stage") == "START",
			Device: int(getInt(dict, "device")),
			TimeUS: getInt(dict, "time_us"),
		}
		if err := d.lim.checkTime("time_us", a.TimeUS); err != nil {
			return nil, fmt.Errorf("external_annotations[%d]: %w", i, err)
		}
		out = append(out, a)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TimeUS < out[j].TimeUS })
	return out, nil
}

func settings(v pickle.Value) profiler.Settings {
	var s profiler.Settings
	if v.Kind != pickle.DictKind {
		return s
	}
	dict := v.Ref.(*pickle.Dict)
	s.AllocConf = getString(dict, "PYTORCH_CUDA_ALLOC_CONF")
	if b, ok := dict.Get("expandable_segments"); ok {
		s.ExpandableSegments, _ = b.AsBool()
	}
	s.MaxSplitSize = getInt(dict, "max_split_size")
	s.Raw = map[string]string{}
	for i := 0; i+1 < len(dict.Items); i += 2 {
		k, ok := dict.Items[i].AsString()
		val := dict.Items[i+1]
		switch val.Kind {
		case pickle.DictKind, pickle.ListKind, pickle.Tuple, pickle.SetKind:
			continue
		}
		if ok {
			s.Raw[k] = fmt.Sprint(val.Plain())
		}
	}
	return s
}

func getInt(d *pickle.Dict, key string) int64 {
	v, _ := d.Get(key)
	n, _ := v.AsInt()
	return n
}

func getUint(d *pickle.Dict, key string) uint64 {
	v, _ := d.Get(key)
	n, _ := v.AsUint()
	return n
}

func getString(d *pickle.Dict, key string) string {
	v, _ := d.Get(key)
	s, _ := v.AsString()
	return s
}

// keyName spells a dict key for a message without expanding containers.
func keyName(k pickle.Value) string {
	switch k.Kind {
	case pickle.Str, pickle.Bytes:
		s := k.Text
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	case pickle.Int, pickle.Bool, pickle.Float, pickle.None:
		return strconv.Quote(fmt.Sprint(k.Plain()))
	}
	return "<" + k.TypeName() + ">"
}
