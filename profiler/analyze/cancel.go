package analyze

import (
	"context"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// RunContext is Run that stops soon after ctx is done (a cancelled request, a
// closed editor): the decode asks ctx before each read of the file, and the
// error then wraps ctx's. Run is RunContext with context.Background().
func RunContext(ctx context.Context, path string, opt Options) (*Result, error) {
	return run(path, opt, func(frames *profiler.Frames, on torchsnap.EventFunc) (*torchsnap.Snapshot, error) {
		return torchsnap.ReadFileContext(ctx, path, frames, on, torchsnap.Options{Progress: opt.Progress})
	})
}

// RunStreamContext is RunStream that stops soon after ctx is done.
func RunStreamContext(ctx context.Context, name string, r io.Reader, opt Options) (*Result, error) {
	return run(name, opt, func(frames *profiler.Frames, on torchsnap.EventFunc) (*torchsnap.Snapshot, error) {
		snap, err := torchsnap.ReadVSMContext(ctx, r, frames, on, torchsnap.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		snap.Path = name
		return snap, nil
	})
}
