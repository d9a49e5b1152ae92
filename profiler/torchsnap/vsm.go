package torchsnap

import (
	"fmt"
	"io"
	"os"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/marshal"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// ReadVSM decodes a snapshot sent as a VSM1 stream (profiler/marshal) — a
// FIFO, a socket, a file being written — frame by frame as it arrives: the
// header dict is read like a pickle's top-level keys, each chunk's entries go
// through the pickle path's per-event code and are dropped. It reads up to the
// end frame and no further; Snapshot.Bytes is the stream's length. The
// stream's limits are marshal.DefaultLimits (opt.Limits are the pickle
// reader's), and a stream of unknown length reports no progress.
func ReadVSM(r io.Reader, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	return readVSM(r, frames, onEvent)
}

// readVSMFile reads the VSM1 file f of size bytes, which must end with its end
// frame.
func readVSMFile(f *os.File, size int64, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	prog := &progressReader{r: io.NewSectionReader(f, 0, size), total: size, fn: opt.Progress}
	snap, err := readVSM(prog, frames, onEvent)
	if err != nil {
		return nil, err
	}
	if snap.Bytes != size {
		return nil, &marshal.Error{Offset: snap.Bytes, Msg: fmt.Sprintf("%d bytes after the VSM1 end frame", size-snap.Bytes)}
	}
	return snap, nil
}

func readVSM(src io.Reader, frames *profiler.Frames, onEvent EventFunc) (*Snapshot, error) {
	d := newDecoder(frames, onEvent)
	r := marshal.NewReader(src, marshal.DefaultLimits)
	var devices []pickle.Value // one list per D frame; entries are consumed, never kept
	r.StreamEntries(func(dev int, entry pickle.Value) error {
		return d.entry(dev, devices[dev].Ref.(*pickle.List), entry)
	})
	var header *pickle.Dict
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch f.Kind {
		case marshal.KindHeader:
			header = f.Value.Ref.(*pickle.Dict)
			if err := d.internStacks(f.Value, map[any]bool{}); err != nil {
				return nil, err
			}
		case marshal.KindDevice:
			devices = append(devices, pickle.Value{Kind: pickle.ListKind, Ref: &pickle.List{}})
		}
	}
	// The snapshot the stream stands for: {**H, "device_traces": devices}.
	items := append(header.Items[:len(header.Items):len(header.Items)],
		pickle.Value{Kind: pickle.Str, Text: "device_traces"},
		pickle.Value{Kind: pickle.ListKind, Ref: &pickle.List{Items: devices}})
	snap, err := d.finish(pickle.Value{Kind: pickle.DictKind, Ref: &pickle.Dict{Items: items}})
	if err != nil {
		return nil, err
	}
	snap.Bytes = r.Offset()
	return snap, nil
}

// internStacks interns the header's frames lists in document order, as the
// pickle path does while it reads them (onAppend): frames and stacks get the
// same IDs from both formats, so an analysis breaks its ties alike.
func (d *decoder) internStacks(v pickle.Value, seen map[any]bool) error {
	var items []pickle.Value
	switch v.Kind {
	case pickle.ListKind:
		l := v.Ref.(*pickle.List)
		if seen[l] {
			return nil
		}
		seen[l] = true
		if len(l.Items) > 0 && isFrame(l.Items[0]) {
			_, err := d.stack(v)
			return err
		}
		items = l.Items
	case pickle.DictKind:
		m := v.Ref.(*pickle.Dict)
		if seen[m] {
			return nil
		}
		seen[m] = true
		items = m.Items
	case pickle.Tuple:
		items = v.Ref.([]pickle.Value)
	}
	for _, it := range items {
		if err := d.internStacks(it, seen); err != nil {
			return err
		}
	}
	return nil
}

// entry streams one trace entry of device dev, as onAppend does for a
// pickle's device trace: the device's list l becomes a trace at its first
// entry, which must be a dict with an "action" key.
func (d *decoder) entry(dev int, l *pickle.List, it pickle.Value) error {
	tag, ok := l.Tag.(traceTag)
	if !ok {
		if !isTraceEntry(it) {
			return fmt.Errorf("device_traces[%d] holds %ss, not trace entries", dev, it.TypeName())
		}
		tag = traceTag(len(d.traces))
		d.traces = append(d.traces, 0)
		l.Tag = tag
	}
	if it.Kind != pickle.DictKind {
		return fmt.Errorf("device trace %d: entry %d is a %s, not a dict", tag, d.traces[tag], it.TypeName())
	}
	if err := d.event(it.Ref.(*pickle.Dict), d.traces[tag]); err != nil {
		return fmt.Errorf("device trace %d, entry %d: %w", tag, d.traces[tag], err)
	}
	d.traces[tag]++
	if d.onEvent != nil {
		return d.onEvent(int(tag), &d.ev)
	}
	return nil
}

// unknownFormat is pickle.Sniff's answer for a file that starts with no
// opcode it recognises.
var unknownFormat = pickle.Sniff([]byte{0}).Error()

// sniff checks a file's first bytes: nil for a pickle or a VSM1 stream, else
// pickle.Sniff's plain answer, naming both formats when neither matches.
func sniff(head []byte) error {
	if marshal.IsVSM(head) {
		return nil
	}
	err := pickle.Sniff(head)
	if err != nil && err.Error() == unknownFormat {
		if len(head) >= 3 && string(head[:3]) == "VSM" {
			return fmt.Errorf("unsupported VSM version %q (vramscope reads VSM1)", head)
		}
		return fmt.Errorf("neither a snapshot pickle nor a VSM1 stream: %w", err)
	}
	return err
}
