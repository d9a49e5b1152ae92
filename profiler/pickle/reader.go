package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// reader is a buffered byte source that knows its offset, so every error can say
// where the input went wrong, and hands out argument bytes without copying.
type reader struct {
	src    io.Reader
	buf    []byte
	pos    int
	end    int
	base   int64 // offset of buf[0]
	err    error
	opAt   int64 // offset of the opcode being decoded
	remain int64 // bytes known to be left in the input after buf, -1 if unknown
}

const bufSize = 1 << 20

func newReader(src io.Reader, size int64) *reader {
	n := bufSize
	if size >= 0 && size+16 < bufSize {
		n = int(size) + 16 // small inputs (tests, fuzzing) need no megabyte buffer
	}
	r := &reader{src: src, buf: make([]byte, n), remain: -1}
	if size >= 0 {
		r.remain = size
	}
	return r
}

// offset is the input position of the next unread byte.
func (r *reader) offset() int64 { return r.base + int64(r.pos) }

// fill makes at least n bytes available (n <= len(buf)) or fails.
func (r *reader) fill(n int) error {
	if r.end-r.pos >= n {
		return nil
	}
	if n > len(r.buf) {
		return r.truncated() // more than the whole (small) input could hold
	}
	if r.err != nil {
		if !errors.Is(r.err, io.EOF) {
			return &Error{Offset: r.base + int64(r.end), Msg: fmt.Sprintf("read error: %v", r.err)}
		}
		return r.truncated()
	}
	copy(r.buf, r.buf[r.pos:r.end])
	r.base += int64(r.pos)
	r.end -= r.pos
	r.pos = 0
	for r.end < n {
		k, err := r.src.Read(r.buf[r.end:])
		r.end += k
		if r.remain >= 0 {
			r.remain -= int64(k)
		}
		if err != nil {
			if r.end >= n {
				r.err = err
				break
			}
			if errors.Is(err, io.EOF) {
				r.err = err
				return r.truncated()
			}
			r.err = err
			return &Error{Offset: r.base + int64(r.end), Msg: fmt.Sprintf("read error: %v", err)}
		}
	}
	return nil
}

func (r *reader) truncated() error {
	return &Error{Offset: r.base + int64(r.end), Msg: fmt.Sprintf("truncated: input ends inside the opcode at byte %d", r.opAt)}
}

// op reads the next opcode byte.
func (r *reader) op() (byte, error) {
	if r.pos >= r.end {
		if err := r.fill(1); err != nil {
			r.opAt = r.offset()
			if r.end == r.pos && errors.Is(r.err, io.EOF) {
				return 0, &Error{Offset: r.offset(), Msg: "truncated: input ends before the STOP opcode"}
			}
			return 0, err
		}
	}
	r.opAt = r.base + int64(r.pos)
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// bytes returns the next n bytes; valid until the next read. n must fit the buffer.
func (r *reader) bytes(n int) ([]byte, error) {
	if r.end-r.pos < n {
		if err := r.fill(n); err != nil {
			return nil, err
		}
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *reader) u8() (byte, error) {
	b, err := r.bytes(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) u16() (uint16, error) {
	b, err := r.bytes(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// available reports whether n more bytes can exist in the input, so a length
// field cannot make the decoder allocate more than the file holds.
func (r *reader) available(n uint64) bool {
	if r.remain < 0 {
		return true
	}
	return n <= uint64(r.remain)+uint64(r.end-r.pos)
}

// blob reads n bytes that may exceed the buffer, into a fresh slice when they do.
func (r *reader) blob(n uint64, limit int64) ([]byte, error) {
	if int64(n) < 0 || int64(n) > limit {
		return nil, &Error{Offset: r.opAt, Msg: fmt.Sprintf("string of %d bytes exceeds the limit of %d", n, limit)}
	}
	if !r.available(n) {
		return nil, &Error{Offset: r.opAt, Msg: fmt.Sprintf("truncated: a %d-byte string runs past the end of the input", n)}
	}
	if n <= uint64(len(r.buf)) {
		return r.bytes(int(n))
	}
	out := make([]byte, n)
	k := copy(out, r.buf[r.pos:r.end])
	r.pos = r.end
	for k < len(out) {
		m, err := io.ReadFull(r.src, out[k:])
		k += m
		r.base += int64(m)
		if r.remain >= 0 {
			r.remain -= int64(m)
		}
		if err != nil {
			return nil, &Error{Offset: r.base + int64(r.pos), Msg: "truncated: input ends inside a string"}
		}
	}
	return out, nil
}

// line reads a newline-terminated argument of the text opcodes (at most 4 KiB).
func (r *reader) line() ([]byte, error) {
	for n := 1; n <= 4096; n++ {
		if r.end-r.pos < n {
			if err := r.fill(n); err != nil {
				return nil, err
			}
		}
		if r.buf[r.pos+n-1] == '\n' {
			b := r.buf[r.pos : r.pos+n-1]
			r.pos += n
			return b, nil
		}
	}
	return nil, &Error{Offset: r.opAt, Msg: "text argument longer than 4096 bytes without a newline"}
}

// skip discards n bytes, which may exceed the buffer.
func (r *reader) skip(n uint64, limit int64) error {
	if int64(n) < 0 || int64(n) > limit {
		return &Error{Offset: r.opAt, Msg: fmt.Sprintf("string of %d bytes exceeds the limit of %d", n, limit)}
	}
	if !r.available(n) {
		return &Error{Offset: r.opAt, Msg: fmt.Sprintf("truncated: a %d-byte string runs past the end of the input", n)}
	}
	for n > 0 {
		if r.pos == r.end {
			if err := r.fill(1); err != nil {
				return err
			}
		}
		k := uint64(r.end - r.pos)
		if k > n {
			k = n
		}
		r.pos += int(k)
		n -= k
	}
	return nil
}
