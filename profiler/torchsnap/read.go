// Package torchsnap turns PyTorch CUDA memory snapshots — the pickles written by
// torch.cuda.memory._dump_snapshot(), or the VSM1 marshal streams the agent
// sends (profiler/marshal) — into the profiler model. Trace events are
// streamed to a callback as they are decoded and then dropped, so a snapshot of
// any length is read in memory proportional to its distinct stacks, not its
// events. Frames and stacks are interned in a shared profiler.Frames table.
package torchsnap

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/marshal"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// Snapshot is everything in a snapshot except the streamed trace events.
type Snapshot struct {
	Path         string
	Bytes        int64
	Frames       *profiler.Frames
	Segments     []profiler.Segment
	Annotations  []profiler.Annotation
	Settings     profiler.Settings
	TraceDevices []int   // device of each trace, by trace number (order of first event)
	TraceEvents  []int64 // events in each trace
	Legacy       bool    // blocks carried the pre-2.1 "history" layout
	// Tensors are the agent's names for live CUDA tensors ("vramscope_tensors"), if it added them.
	Tensors *profiler.TensorNames
}

// EventFunc receives each trace event in order. trace numbers traces in the
// order their first event appears; Snapshot.TraceDevices maps them to devices.
// e is reused after the call returns.
type EventFunc func(trace int, e *profiler.Event) error

// Options control a read.
type Options struct {
	Limits   pickle.Limits
	Progress func(done, total int64) // bytes processed over both passes, called often
}

// ReadFile decodes the snapshot at path, a pickle or a VSM1 stream (told
// apart by the first bytes). Every error names the file.
func ReadFile(path string, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	return ReadFileContext(context.Background(), path, frames, onEvent, opt)
}

func readFile(ctx context.Context, path string, frames *profiler.Frames, onEvent EventFunc, opt Options) (*Snapshot, error) {
	if opt.Limits == (pickle.Limits{}) {
		opt.Limits = pickle.DefaultLimits
	}
	f, st, err := OpenFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if err := sniff(head[:n]); err != nil {
		return nil, err
	}
	size := st.Size()
	var src io.ReaderAt = f
	if ctx.Done() != nil {
		src = ctxReaderAt{ctx, f}
	}
	if marshal.IsVSM(head[:n]) {
		snap, err := readVSMFile(src, size, frames, onEvent, opt)
		if err != nil {
			return nil, err
		}
		snap.Path = path
		return snap, nil
	}
	prog := &progressReader{total: 2 * size, fn: opt.Progress}
	prog.r = io.NewSectionReader(src, 0, size)
	plan, err := pickle.ScanAt(progressAt{src, prog}, size, opt.Limits, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	snap, err := decode(prog, size, plan, opt.Limits, frames, onEvent)
	if err != nil {
		return nil, err
	}
	snap.Path = path
	return snap, nil
}

// decode runs the decoding pass that plan was made for.
func decode(src io.Reader, size int64, plan *pickle.Plan, lim pickle.Limits, frames *profiler.Frames, onEvent EventFunc) (*Snapshot, error) {
	d := newDecoder(frames, onEvent)
	m := pickle.NewMachine(src, size, plan, lim)
	m.OnAppend = d.onAppend(m)
	m.OnFlatDict = d.flatEvent
	root, err := m.Run()
	if err != nil {
		return nil, err
	}
	snap, err := d.finish(root)
	if err != nil {
		return nil, err
	}
	snap.Bytes = size
	return snap, nil
}

// Decode reads a snapshot held in memory, a pickle or a VSM1 stream (tests,
// fuzzing, small inputs).
func Decode(b []byte, frames *profiler.Frames, onEvent EventFunc) (*Snapshot, error) {
	if err := sniff(b[:min(len(b), 4)]); err != nil {
		return nil, err
	}
	if marshal.IsVSM(b) {
		return readVSM(byteReader(b), frames, onEvent)
	}
	lim := pickle.DefaultLimits
	plan, err := pickle.Scan(byteReader(b), int64(len(b)), lim)
	if err != nil {
		return nil, err
	}
	return decode(byteReader(b), int64(len(b)), plan, lim, frames, onEvent)
}

type progressReader struct {
	mu    sync.Mutex
	r     io.Reader
	done  int64
	total int64
	next  int64
	fn    func(done, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.add(n)
	return n, err
}

// add counts bytes read; the planning pass reads from several goroutines.
func (p *progressReader) add(n int) {
	done := atomic.AddInt64(&p.done, int64(n))
	if p.fn != nil && done >= atomic.LoadInt64(&p.next) {
		p.mu.Lock()
		if done >= p.next {
			p.fn(done, p.total)
			p.next = done + 8<<20
		}
		p.mu.Unlock()
	}
}

// progressAt counts what the planning pass reads.
type progressAt struct {
	f io.ReaderAt
	p *progressReader
}

func (a progressAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := a.f.ReadAt(b, off)
	a.p.add(n)
	return n, err
}
