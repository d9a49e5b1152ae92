package marshal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// Magic starts every VSM1 stream.
const Magic = "VSM1"

// The frame kinds of a VSM1 stream.
const (
	KindHeader = 'H' // the snapshot dict without "device_traces"
	KindDevice = 'D' // the next device's trace list starts
	KindChunk  = 'C' // trace entries of the current device
	KindEnd    = 'Z' // the end of the stream
)

const frameHeader = 9 // kind byte and uint64 length

// IsVSM reports whether head, a stream's first bytes, starts with the magic.
func IsVSM(head []byte) bool { return bytes.HasPrefix(head, []byte(Magic)) }

// Frame is one decoded frame of a VSM1 stream.
type Frame struct {
	Kind   byte
	Offset int64        // of the frame's kind byte in the stream
	Value  pickle.Value // KindHeader: the dict; KindChunk: the list; else None
	Device int          // KindDevice, KindChunk: the device (0, 1, ...)
}

// Reader reads the frames of a VSM1 stream, one at a time: a frame's payload
// is read whole and decoded, so memory is bounded by one frame. It checks the
// order of the frames as it goes.
type Reader struct {
	src     *bufio.Reader
	off     int64
	dec     *Decoder
	lim     Limits
	buf     []byte
	started bool // the magic was read
	header  bool // the H frame was read
	device  int  // the current device, -1 before the first D
	ended   bool
}

// NewReader returns a Reader of the stream src (zero Limits: the defaults).
func NewReader(src io.Reader, lim Limits) *Reader {
	dec := NewDecoder(lim)
	return &Reader{src: bufio.NewReaderSize(src, 1<<16), dec: dec, lim: dec.lim, device: -1}
}

// Offset is the number of stream bytes consumed so far.
func (r *Reader) Offset() int64 { return r.off }

// Devices is the number of D frames read so far.
func (r *Reader) Devices() int { return r.device + 1 }

// Shared returns the objects the last frame's payload holds more than once
// (Decoder.Shared).
func (r *Reader) Shared() []pickle.Value { return r.dec.Shared() }

// PayloadAt is the stream offset of the frame's payload.
func (f Frame) PayloadAt() int64 { return f.Offset + frameHeader }

// Next returns the next frame; after the end frame it returns io.EOF. A stream
// that stops before its end frame is an *Error (truncated), as is a frame out
// of order or a payload that does not decode. The Value of a frame is valid
// until the caller drops it; the Reader keeps no reference to it.
func (r *Reader) Next() (Frame, error) {
	f, b, err := r.NextPayload(r.buf)
	if err != nil {
		return Frame{}, err
	}
	r.buf = b[:0]
	if f.Kind == KindHeader || f.Kind == KindChunk {
		if f.Value, err = r.dec.DecodePayload(f, b); err != nil {
			return Frame{}, err
		}
	}
	return f, nil
}

// NextPayload is Next without the decoding, so that frames can be decoded on
// other goroutines (DecodePayload, DecodeEntries) while the stream is read on:
// the payload of a header or chunk frame is read into buf (grown as needed)
// and returned, and the Reader keeps no reference to it (for other frames,
// and on an error, buf comes back to be reused). Frame.Value is None.
func (r *Reader) NextPayload(buf []byte) (Frame, []byte, error) {
	if r.ended {
		return Frame{}, buf, io.EOF
	}
	if !r.started {
		if err := r.magic(); err != nil {
			return Frame{}, buf, err
		}
	}
	at := r.off
	var hdr [frameHeader]byte
	if n, err := io.ReadFull(r.src, hdr[:]); err != nil {
		r.off += int64(n)
		return Frame{}, buf, r.readError(err, at, "a frame header")
	}
	r.off += frameHeader
	kind, n := hdr[0], binary.LittleEndian.Uint64(hdr[1:])
	if err := r.order(at, kind, n); err != nil {
		return Frame{}, buf, err
	}
	f := Frame{Kind: kind, Offset: at, Device: r.device, Value: pickle.Value{Kind: pickle.None}}
	switch kind {
	case KindDevice:
		r.device++
		f.Device = r.device
		return f, buf, nil
	case KindEnd:
		r.ended = true
		return f, buf, nil
	}
	b, err := r.read(at, kind, int64(n), buf[:0])
	if err != nil {
		return Frame{}, b, err
	}
	r.header = true // the order allows a header frame only first
	return f, b, nil
}

func (r *Reader) magic() error {
	head := make([]byte, len(Magic))
	n, err := io.ReadFull(r.src, head)
	r.off += int64(n)
	switch {
	case string(head[:n]) == Magic:
		r.started = true
		return nil
	case err != nil && strings.HasPrefix(Magic, string(head[:n])):
		return &Error{Offset: r.off, Msg: fmt.Sprintf("VSM1 stream truncated: %d bytes, not even the magic", n)}
	case n >= 3 && string(head[:3]) == "VSM":
		return &Error{Msg: fmt.Sprintf("unsupported VSM version %q (this reader reads VSM1)", head[:n])}
	}
	return &Error{Msg: fmt.Sprintf("not a VSM1 stream: it starts with %q, not %q", head[:n], Magic)}
}

// order checks a frame header against what came before.
func (r *Reader) order(at int64, kind byte, n uint64) error {
	fail := func(format string, args ...any) error {
		return &Error{Offset: at, Msg: fmt.Sprintf("VSM1 frame %q: ", kind) + fmt.Sprintf(format, args...)}
	}
	switch {
	case kind != KindHeader && kind != KindDevice && kind != KindChunk && kind != KindEnd:
		return &Error{Offset: at, Msg: fmt.Sprintf("VSM1: unknown frame kind 0x%02x", kind)}
	case kind == KindHeader && r.header:
		return fail("a second header")
	case kind != KindHeader && !r.header:
		return fail("before the header frame 'H'")
	case kind == KindChunk && r.device < 0:
		return fail("trace entries before the first device frame 'D'")
	case (kind == KindDevice || kind == KindEnd) && n != 0:
		return fail("payload of %d bytes, want none", n)
	case n > uint64(r.lim.MaxPayload):
		return fail("payload of %d bytes exceeds the limit of %d", n, r.lim.MaxPayload)
	}
	return nil
}

// DecodePayload decodes the payload b of a header or chunk frame f (read by
// NextPayload) as Next does: a header must hold a dict, a chunk a list.
func (d *Decoder) DecodePayload(f Frame, b []byte) (pickle.Value, error) {
	v, err := d.Decode(b, f.PayloadAt())
	if err != nil {
		return pickle.Value{}, err
	}
	want := pickle.DictKind
	if f.Kind == KindChunk {
		want = pickle.ListKind
	}
	if v.Kind != want {
		return pickle.Value{}, &Error{Offset: f.Offset, Msg: fmt.Sprintf("VSM1 frame %q holds a %s, want a %s", f.Kind, v.TypeName(), pickle.Value{Kind: want}.TypeName())}
	}
	return v, nil
}

// read reads a frame's payload into b (empty). It grows as bytes arrive, so a
// length field the stream does not back allocates nothing; the caller may
// reuse it for the next frame (decoded values keep nothing of it).
func (r *Reader) read(at int64, kind byte, n int64, b []byte) ([]byte, error) {
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(n-int64(len(b)), max(int64(len(b)), 1<<20))))
		}
		k, err := io.ReadFull(r.src, b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+k]
		r.off += int64(k)
		if err != nil {
			return b[:0], r.readError(err, at, fmt.Sprintf("a %q frame of %d bytes", kind, n))
		}
	}
	return b, nil
}

// readError turns a short read into a truncation error at the stream's end.
func (r *Reader) readError(err error, at int64, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if what == "a frame header" && r.off == at {
			return &Error{Offset: r.off, Msg: "VSM1 stream truncated: it ends without its end frame 'Z'"}
		}
		return &Error{Offset: r.off, Msg: fmt.Sprintf("VSM1 stream truncated inside %s (at byte %d)", what, at)}
	}
	return &Error{Offset: r.off, Msg: fmt.Sprintf("reading %s: %v", what, err)}
}
