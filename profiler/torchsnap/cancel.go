package torchsnap

import (
	"context"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/profiler"
)

// ReadFileContext is ReadFile that stops soon after ctx is done: every read of
// the file asks ctx first, and both passes read in pieces of at most a
// megabyte (a few milliseconds of decoding), so a cancelled request or a
// closed editor stops a decode of any size within milliseconds. The error
// then wraps ctx.Err().
func ReadFileContext(ctx context.Context, path string, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	s, err := readFile(ctx, path, frames, onEvent, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, stopped(ctx, err))
	}
	return s, nil
}

// ReadVSMContext is ReadVSM that stops soon after ctx is done (a read that
// blocks, on a FIFO whose writer is stuck, returns only when the writer
// closes or the caller closes the reader).
func ReadVSMContext(ctx context.Context, r io.Reader, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	if ctx.Done() != nil {
		r = ctxReader{ctx, r}
	}
	s, err := readVSM(r, frames, onEvent)
	if err != nil {
		return nil, stopped(ctx, err)
	}
	return s, nil
}

// stopped reports a read that failed because ctx ended as ctx's error: the
// readers below turn it into a read error that the decoders word their own way.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("stopped: %w", context.Cause(ctx))
	}
	return err
}

// ctxReader fails each Read once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// ctxReaderAt fails each ReadAt once ctx is done.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(b []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(b, off)
}
