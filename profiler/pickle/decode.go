package pickle

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Decode reads a whole pickle held in memory.
func Decode(b []byte, lim Limits) (Value, error) {
	plan, err := Scan(bytes.NewReader(b), int64(len(b)), lim)
	if err != nil {
		return Value{}, err
	}
	return NewMachine(bytes.NewReader(b), int64(len(b)), plan, lim).Run()
}

// File is a pickle on disk, read twice: once by Scan, once by a Machine.
type File struct {
	f    *os.File
	size int64
	Plan *Plan
}

// OpenFile opens path and runs the planning pass over it. Errors name the file.
func OpenFile(path string, lim Limits) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if err := checkMagic(f, path); err != nil {
		f.Close()
		return nil, err
	}
	plan, err := Scan(f, st.Size(), lim)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, size: st.Size(), Plan: plan}, nil
}

// checkMagic gives a plain answer for the commonest wrong input: not a pickle at all.
func checkMagic(f *os.File, path string) error {
	var head [2]byte
	n, _ := io.ReadFull(f, head[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	switch {
	case n == 0:
		return fmt.Errorf("%s: empty file, not a pickle", path)
	case head[0] == 0xfd || head[0] == 0x1f || head[0] == 'B' && n > 1 && head[1] == 'Z' || head[0] == 0x28 && n > 1 && head[1] == 0xb5:
		return fmt.Errorf("%s: compressed file (xz, gzip, bzip2 or zstd); decompress it first", path)
	case head[0] == '{' || head[0] == '[':
		return fmt.Errorf("%s: looks like JSON, not a pickle (vramscope reads torch.cuda.memory._dump_snapshot() output)", path)
	case head[0] != opProto:
		return fmt.Errorf("%s: not a pickle of protocol 2 or later (first byte 0x%02x)", path, head[0])
	}
	return nil
}

// Size is the file's length in bytes.
func (f *File) Size() int64 { return f.size }

// Machine returns the decoding pass over the file; call it once.
func (f *File) Machine(lim Limits) *Machine { return NewMachine(f.f, f.size, f.Plan, lim) }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }
