package capture

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// A streamed capture: the agent writes its snapshot as VSM1 (marshal chunks)
// into a FIFO in the incoming directory; the daemon copies it to the
// incoming part file, hashing and syncing it, while the engine analyses it,
// so analysis is ready about when the agent finishes writing.

// Streamed is what the reader made of a stream: the snapshot written to the
// part file (Size bytes, SHA-256 Sum) and its analysis, or the error.
type Streamed struct {
	Res     *analyze.Result
	Size    int64
	Sum     string
	Got     bool // a writer sent at least one byte
	Err     error
	Stopped bool // Wait gave up on the stream (Err says how far it got)
}

// Stream is one FIFO the agent may write to.
type Stream struct {
	st   *store.Store // the FIFO and the part file are opened and removed through it
	fifo string
	done chan Streamed

	mu      sync.Mutex
	f       *os.File // the FIFO, once the reader has it open
	stopped bool
}

// FIFO is the path the agent writes the stream to (agent.dump's stream).
func (s *Stream) FIFO() string { return s.fifo }

// OpenStream makes the FIFO beside part and starts reading it. Without FIFOs
// (another platform, a file system without them) it returns nil: the agent
// then writes a pickle to part.
func OpenStream(st *store.Store, part string) *Stream {
	fifo := part + ".fifo"
	// By path: os.Root has no mkfifo. The incoming directory is checked to
	// be ours and writable by nobody else (store/datadir.go).
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil
	}
	s := &Stream{st: st, fifo: fifo, done: make(chan Streamed, 1)}
	go func() {
		var sr Streamed
		// A panic on this goroutine would end the daemon: it fails the capture instead.
		if err := analyze.Guard(part, func() error { sr = s.read(part); return nil }); err != nil {
			sr = Streamed{Got: true, Err: err}
		}
		s.done <- sr
	}()
	return s
}

// Wait returns what the reader made of the stream, or gives up on it once
// ctx is done (the capture's timeout covers the stream too): an agent that
// answers that it streams and then never opens the FIFO, or writes part of a
// snapshot and holds the FIFO open, held snapshot.take for ever. The reader
// is stopped either way, and has removed the FIFO and the part file when
// wait returns.
func (s *Stream) Wait(ctx context.Context) Streamed {
	select {
	case sr := <-s.done:
		return sr
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.stopped = true
	if s.f != nil {
		s.f.SetReadDeadline(time.Now()) // ends a read the agent keeps waiting
	}
	s.mu.Unlock()
	s.Close() // ends an open that waits for the agent
	sr := <-s.done
	sr.Stopped = true
	return sr
}

// opened hands the reader's FIFO to wait; false: wait gave up already.
func (s *Stream) opened(f *os.File) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f = f
	return !s.stopped
}

// close unblocks the reader if no agent opened the FIFO (one that wrote a
// pickle instead, or failed first): it opens the FIFO for writing, which
// succeeds once the reader waits in its open, and closes it (the reader sees
// an empty stream and leaves the part file alone). The FIFO's name goes
// either way (the reader, once open, no longer needs it).
func (s *Stream) Close() {
	defer s.st.RemoveIncoming(s.fifo)
	for i := 0; i < 100; i++ {
		w, err := s.st.OpenIncoming(s.fifo, os.O_WRONLY|syscall.O_NONBLOCK)
		if err == nil {
			w.Close()
			return
		}
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Stream) read(part string) Streamed {
	f, err := s.st.OpenIncoming(s.fifo, os.O_RDONLY) // until a writer opens it
	s.st.RemoveIncoming(s.fifo)
	if err != nil {
		return Streamed{Err: err}
	}
	defer f.Close()
	if !s.opened(f) {
		return Streamed{Err: errors.New("stopped before the agent opened the stream")}
	}
	growPipe(f)
	var first [4]byte
	n, err := io.ReadFull(f, first[:])
	if n == 0 {
		return Streamed{Err: errors.New("nothing was written to the stream")}
	}
	if err != nil {
		return Streamed{Got: true, Err: fmt.Errorf("the stream ended after %d bytes", n)}
	}
	out, err := s.st.CreateIncoming(part)
	if err != nil {
		io.Copy(io.Discard, f) // let the agent finish writing
		return Streamed{Got: true, Err: err}
	}
	p := newPump(f, first[:], out)
	res, aerr := analyze.RunStream(part, p.reader, analyze.Options{})
	w := p.finish() // anything after the end frame is written too, and the file synced
	if aerr == nil {
		aerr = w.err
	}
	if aerr != nil {
		s.st.RemoveIncoming(part)
		return Streamed{Got: true, Err: aerr}
	}
	return Streamed{Res: res, Size: w.size, Sum: w.sum, Got: true}
}

// A pump moves a stream from the FIFO to two consumers at once: the analysis,
// and a writer that appends it to the part file, hashes it, starts its
// writeback as it goes and syncs it at the end. The analysis, the critical
// path of a capture, then waits on neither the hash nor the disk, and the
// sync overlaps the analysis' last work. Blocks cycle through a free list, so
// a stream costs streamBlocks*streamBlock bytes however long it is, and a slow
// consumer slows the reads (and so the agent), never grows memory.
const (
	streamBlock     = 1 << 20
	streamBlocks    = 16
	writebackChunks = 8 << 20 // start writing back every 8 MiB
)

type block struct {
	b    []byte
	n    int
	refs atomic.Int32 // consumers still holding it
}

type written struct {
	size int64
	sum  string
	err  error
}

type pump struct {
	free     chan *block
	toReader chan *block
	toWriter chan *block
	stop     chan struct{} // closed when the analysis reads no more
	reader   *blockReader  // the stream as the analysis reads it
	readErr  error         // the FIFO's, set before toReader closes
	written  chan written
}

func newPump(f *os.File, first []byte, out *os.File) *pump {
	p := &pump{free: make(chan *block, streamBlocks), toReader: make(chan *block, streamBlocks),
		toWriter: make(chan *block, streamBlocks), stop: make(chan struct{}), written: make(chan written, 1)}
	for i := 0; i < streamBlocks; i++ {
		p.free <- &block{b: make([]byte, streamBlock)}
	}
	p.reader = &blockReader{ch: p.toReader, release: p.release}
	go p.read(f, first)
	go p.write(out)
	return p
}

func (p *pump) release(b *block) {
	if b.refs.Add(-1) == 0 {
		p.free <- b
	}
}

// read fills free blocks from the FIFO until its end (the agent closed it).
func (p *pump) read(f *os.File, first []byte) {
	defer close(p.toWriter)
	defer close(p.toReader)
	pre := first
	for {
		b := <-p.free
		k := copy(b.b, pre)
		pre = nil
		n, err := f.Read(b.b[k:])
		if b.n = k + n; b.n > 0 {
			b.refs.Store(2)
			p.toWriter <- b
			select {
			case p.toReader <- b:
			case <-p.stop:
				p.release(b)
			}
		} else {
			p.free <- b
		}
		if err != nil {
			if err != io.EOF {
				p.readErr = err
			}
			return
		}
	}
}

// write appends every block to out, hashing it; at the end it syncs and
// closes out.
func (p *pump) write(out *os.File) {
	h := sha256.New()
	var size, flushed int64
	var err error
	for b := range p.toWriter {
		if err == nil {
			_, err = out.Write(b.b[:b.n])
		}
		h.Write(b.b[:b.n])
		size += int64(b.n)
		p.release(b)
		if err == nil && size-flushed >= writebackChunks {
			startWriteback(out, flushed, size-flushed)
			flushed = size
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	p.written <- written{size: size, sum: hex.EncodeToString(h.Sum(nil)), err: err}
}

// finish is called once the analysis returned: it lets go of the blocks the
// analysis will not read, waits for the end of the stream and its write.
func (p *pump) finish() written {
	close(p.stop)
	p.reader.close()
	for b := range p.toReader {
		p.release(b)
	}
	w := <-p.written
	if w.err == nil && p.readErr != nil {
		w.err = p.readErr
	}
	return w
}

// blockReader reads the blocks the pump hands it, releasing each when done.
type blockReader struct {
	ch      <-chan *block
	cur     *block
	off     int
	release func(*block)
}

func (r *blockReader) Read(b []byte) (int, error) {
	for r.cur == nil || r.off == r.cur.n {
		if r.cur != nil {
			r.release(r.cur)
			r.cur = nil
		}
		c, ok := <-r.ch
		if !ok {
			return 0, io.EOF
		}
		r.cur, r.off = c, 0
	}
	n := copy(b, r.cur.b[r.off:r.cur.n])
	r.off += n
	return n, nil
}

func (r *blockReader) close() {
	if r.cur != nil {
		r.release(r.cur)
		r.cur = nil
	}
}
