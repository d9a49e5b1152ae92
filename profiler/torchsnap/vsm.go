package torchsnap

import (
	"errors"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/marshal"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// ReadVSM decodes a snapshot sent as a VSM1 stream (profiler/marshal) — a
// FIFO, a socket, a file being written — frame by frame as it arrives: the
// header dict is read like a pickle's top-level keys, each chunk's entries go
// through the pickle path's per-event code and are dropped. The stream is read
// on a goroutine of its own a few chunks ahead, and chunks are decoded on
// several (vsmpipe.go); events still reach onEvent in order, on the caller's
// goroutine. It reads up to the end frame and no further, and returns only
// once nothing reads r any more; Snapshot.Bytes is the stream's length. The
// stream's limits are marshal.DefaultLimits (opt.Limits are the pickle
// reader's), and a stream of unknown length reports no progress.
func ReadVSM(r io.Reader, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	return readVSM(r, frames, onEvent)
}

// readVSMFile reads the VSM1 file f of size bytes, which must end with its end
// frame.
func readVSMFile(f io.ReaderAt, size int64, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
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
	p := startVSM(src)
	defer p.close()
	var header pickle.Value
	var devices []pickle.Value // one list per D frame; entries are consumed, never kept
	dec := marshal.NewDecoder(marshal.DefaultLimits)
	var stacks stackMap
	for {
		c := p.next()
		if c.err != nil {
			return nil, c.err
		}
		var err error
		switch c.f.Kind {
		case marshal.KindHeader:
			if header, err = dec.DecodePayload(c.f, c.payload); err == nil {
				err = d.internStacks(header, map[any]bool{})
			}
		case marshal.KindDevice:
			devices = append(devices, pickle.Value{Kind: pickle.ListKind, Ref: &pickle.List{}})
		case marshal.KindChunk:
			err = d.chunk(c, devices[c.f.Device].Ref.(*pickle.List), &stacks)
		case marshal.KindEnd:
			return d.finishVSM(header, devices, c.end)
		}
		p.done(c)
		if err != nil {
			return nil, err
		}
	}
}

// finishVSM builds the snapshot the stream stands for, {**H, "device_traces":
// devices}, from what was not streamed.
func (d *decoder) finishVSM(header pickle.Value, devices []pickle.Value, size int64) (*Snapshot, error) {
	h := header.Ref.(*pickle.Dict)
	items := append(h.Items[:len(h.Items):len(h.Items)],
		pickle.Value{Kind: pickle.Str, Text: "device_traces"},
		pickle.Value{Kind: pickle.ListKind, Ref: &pickle.List{Items: devices}})
	snap, err := d.finish(pickle.Value{Kind: pickle.DictKind, Ref: &pickle.Dict{Items: items}})
	if err != nil {
		return nil, err
	}
	snap.Bytes = size
	return snap, nil
}

// chunk streams the events of a chunk decoded on a worker (vsmChunk.decode):
// each gets its stack from the shared table, in the order the pickle path
// would intern it, and goes to onEvent; then the chunk's error, if any, as
// the pickle path would have met it after those events.
func (d *decoder) chunk(c *vsmChunk, l *pickle.List, stacks *stackMap) error {
	if c.tag < 0 {
		return c.decodeErr // no entries
	}
	tag := traceTag(c.tag)
	l.Tag = tag
	for len(d.traces) <= c.tag {
		d.traces = append(d.traces, 0)
	}
	stacks.reset(c.frames)
	for i := range c.events {
		e := &c.events[i]
		e.Stack = stacks.global(e.Stack, d.frames)
		if err := d.emit(c.tag, e); err != nil {
			return fmt.Errorf("VSM1 chunk at byte %d: %w", c.f.Offset, err)
		}
	}
	d.traces[tag] = c.seq + int64(len(c.events))
	return c.decodeErr
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

// sniff checks a file's first bytes: nil for a pickle or a VSM1 stream, else
// pickle.Sniff's plain answer, naming both formats when neither matches.
func sniff(head []byte) error {
	if marshal.IsVSM(head) {
		return nil
	}
	err := pickle.Sniff(head)
	if errors.Is(err, pickle.ErrNotPickle) {
		if len(head) >= 3 && string(head[:3]) == "VSM" {
			return fmt.Errorf("unsupported VSM version %q (vramscope reads VSM1)", head)
		}
		return fmt.Errorf("neither a snapshot pickle nor a VSM1 stream: %w", err)
	}
	return err
}
