package pickle

import (
	"bytes"
	"errors"
)

// Decode reads a whole pickle held in memory.
func Decode(b []byte, lim Limits) (Value, error) {
	plan, err := Scan(bytes.NewReader(b), int64(len(b)), lim)
	if err != nil {
		return Value{}, err
	}
	return NewMachine(bytes.NewReader(b), int64(len(b)), plan, lim).Run()
}

// ErrNotPickle is Sniff's answer for a file that starts with no opcode of a
// binary pickle (and none of the other formats it recognises).
var ErrNotPickle = errors.New("not a pickle of protocol 2 or later (no PROTO opcode at byte 0)")

// Sniff gives a plain answer for the commonest wrong inputs from a file's first
// bytes: empty, compressed, JSON, or not a binary pickle at all (ErrNotPickle).
func Sniff(head []byte) error {
	switch {
	case len(head) == 0:
		return errors.New("empty file, not a pickle")
	case head[0] == 0xfd || head[0] == 0x1f || bytes.HasPrefix(head, []byte("BZh")) || bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return errors.New("compressed file (xz, gzip, bzip2 or zstd); decompress it first")
	case head[0] == '{' || head[0] == '[':
		return errors.New("looks like JSON, not a pickle (vramscope reads the output of torch.cuda.memory._dump_snapshot())")
	case head[0] != opProto:
		return ErrNotPickle
	}
	return nil
}
