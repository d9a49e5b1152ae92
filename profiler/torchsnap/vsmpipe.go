package torchsnap

// The VSM1 pipeline: one goroutine reads the stream a few frames ahead (so a
// writer on the other end of a FIFO is not kept waiting while a chunk is
// decoded), workers decode chunks into events, each chunk with a stack table
// of its own, and readVSM takes the frames back in stream order, mapping each
// chunk's stacks to the shared table as the pickle path would intern them.
// Memory is bounded by the frames in flight: the stream is read on only while
// they hold less than vsmBudget bytes (payloads and events), and at most two
// more than the workers.

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/marshal"
	"github.com/vramscope/vramscope/profiler/pickle"
)

// maxVSMWorkers bounds the chunks decoded at once: beyond a few, the caller's
// own work per event is the limit.
const maxVSMWorkers = 4

// vsmBudget: the stream is read on while the frames in flight hold less.
const vsmBudget = 8 << 20

// vsmChunk is one frame on its way through the pipeline.
type vsmChunk struct {
	f       marshal.Frame
	payload []byte
	err     error // reading the stream stopped at this frame
	end     int64 // KindEnd: the stream's length
	cost    int64 // bytes it holds in flight: the payload and the events to come
	done    chan struct{}
	// A chunk frame: its trace (-1: the chunk says it holds no entries), the
	// number of its first entry in the trace, and whether that entry is the
	// trace's first; what a worker decoded.
	tag       int
	seq       int64
	first     bool
	events    []profiler.Event // Stack: in frames
	frames    *profiler.Frames // the chunk's own stack table
	decodeErr error            // decoding stopped after events
}

type vsmPipe struct {
	src   stopReader
	order chan *vsmChunk // frames in stream order
	jobs  chan *vsmChunk // chunks to decode
	quit  chan struct{}
	wg    sync.WaitGroup
	// The frames not in flight, how many there are in all (at most max),
	// and the bytes of those in flight.
	mu       sync.Mutex
	room     *sync.Cond
	free     []*vsmChunk
	made     int
	max      int
	inflight int64
}

// startVSM starts reading src.
func startVSM(src io.Reader) *vsmPipe {
	workers := max(1, min(runtime.GOMAXPROCS(0), maxVSMWorkers))
	n := workers + 2
	p := &vsmPipe{order: make(chan *vsmChunk, n), jobs: make(chan *vsmChunk, n), quit: make(chan struct{}), max: n}
	p.room = sync.NewCond(&p.mu)
	p.src = stopReader{r: src, quit: p.quit}
	p.wg.Add(1 + workers)
	go p.read()
	for range workers {
		go p.work()
	}
	return p
}

// next returns the next frame, decoded. The end frame, or a frame whose
// reading failed (err), is the last.
func (p *vsmPipe) next() *vsmChunk {
	c := <-p.order
	<-c.done
	return c
}

// done hands a frame back once the caller is through with it.
func (p *vsmPipe) done(c *vsmChunk) {
	p.mu.Lock()
	p.inflight -= c.cost
	p.free = append(p.free, c)
	p.room.Signal()
	p.mu.Unlock()
}

// take returns a frame to read into once the frames in flight leave room for
// one more (nil: the pipeline is closing).
func (p *vsmPipe) take() *vsmChunk {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		select {
		case <-p.quit:
			return nil
		default:
		}
		switch {
		case p.inflight >= vsmBudget:
		case len(p.free) > 0:
			c := p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			return c
		case p.made < p.max:
			p.made++
			return &vsmChunk{done: make(chan struct{}, 1)}
		}
		p.room.Wait()
	}
}

// hold counts a frame just read as in flight.
func (p *vsmPipe) hold(c *vsmChunk) {
	c.cost = int64(cap(c.payload)) + listLen(c.payload)*int64(unsafe.Sizeof(profiler.Event{}))
	p.mu.Lock()
	p.inflight += c.cost
	p.mu.Unlock()
}

// close stops the pipeline and returns once nothing reads the stream any more
// (a read in progress is waited for) and no worker runs.
func (p *vsmPipe) close() {
	close(p.quit)
	p.mu.Lock()
	p.room.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// read reads frames into free vsmChunks until the end frame or an error,
// numbering each chunk's entries in its trace.
func (p *vsmPipe) read() {
	defer p.wg.Done()
	defer close(p.jobs)
	r := marshal.NewReader(&p.src, marshal.DefaultLimits)
	var devTags []int // the trace of each device so far, -1 before its first entry
	var seqs []int64  // entries in each trace so far
	for {
		c := p.take()
		if c == nil {
			return
		}
		f, b, err := r.NextPayload(c.payload[:0])
		c.f, c.payload, c.err = f, b, err
		p.hold(c)
		switch {
		case err != nil:
		case f.Kind == marshal.KindDevice:
			devTags = append(devTags, -1)
		case f.Kind == marshal.KindEnd:
			c.end = r.Offset()
		case f.Kind == marshal.KindChunk:
			c.tag, c.first = -1, false
			if n := listLen(b); n > 0 {
				if devTags[f.Device] < 0 {
					devTags[f.Device], c.first = len(seqs), true
					seqs = append(seqs, 0)
				}
				c.tag = devTags[f.Device]
				c.seq = seqs[c.tag]
				seqs[c.tag] += n
			}
			p.order <- c
			p.jobs <- c
			continue
		}
		c.done <- struct{}{}
		p.order <- c
		if err != nil || f.Kind == marshal.KindEnd {
			return
		}
	}
}

// listLen is the length a chunk's list says it has, at most a byte an item
// (0 if it is no list: the decoding says what is wrong).
func listLen(b []byte) int64 {
	if len(b) < 5 || b[0]&^0x80 != '[' {
		return 0
	}
	n := int64(int32(uint32(b[1]) | uint32(b[2])<<8 | uint32(b[3])<<16 | uint32(b[4])<<24))
	return min(max(0, n), int64(len(b)-5))
}

func (p *vsmPipe) work() {
	defer p.wg.Done()
	var w vsmWorker
	for c := range p.jobs {
		select {
		case <-p.quit:
		default:
			w.decodeSafely(c)
		}
		c.done <- struct{}{}
	}
}

// stopReader stops reading once quit is closed.
type stopReader struct {
	r    io.Reader
	quit chan struct{}
}

var errStopped = errors.New("stopped")

func (s *stopReader) Read(b []byte) (int, error) {
	select {
	case <-s.quit:
		return 0, errStopped
	default:
		return s.r.Read(b)
	}
}

// vsmWorker decodes chunks into events with the pickle path's per-entry code
// (flatEvent), stacks interned into the chunk's own table.
type vsmWorker struct {
	dec  *marshal.Decoder
	d    *decoder
	each marshal.EntryFunc
	list pickle.List // the trace, as flatEvent knows it
	c    *vsmChunk
	n    int64 // entries handed out
}

// decodeSafely is decode on a worker goroutine, where a panic would end the
// process: it becomes the chunk's error, and the worker starts afresh.
func (w *vsmWorker) decodeSafely(c *vsmChunk) {
	defer func() {
		if r := recover(); r != nil {
			c.decodeErr = fmt.Errorf("VSM1 chunk at byte %d: internal error decoding it: %v", c.f.Offset, r)
			*w = vsmWorker{}
		}
	}()
	w.decode(c)
}

func (w *vsmWorker) decode(c *vsmChunk) {
	if w.dec == nil {
		w.dec = marshal.NewDecoder(marshal.DefaultLimits)
		w.d = newDecoder(nil, func(_ int, e *profiler.Event) error {
			w.c.events = append(w.c.events, *e)
			return nil
		})
		w.each = w.entry
	}
	w.c, w.n = c, 0
	c.events, c.frames = slices.Grow(c.events[:0], int(min(listLen(c.payload), 1<<14))), profiler.NewFrames()
	w.d.frames = c.frames
	if c.tag >= 0 {
		w.list.Tag = traceTag(c.tag)
		w.d.traces = slices.Grow(w.d.traces[:0], c.tag+1)[:c.tag+1]
		w.d.traces[c.tag] = c.seq
	}
	c.decodeErr = w.dec.DecodeEntries(c.payload, c.f.PayloadAt(), w.each)
	w.c = nil
}

// entry makes an event of a chunk's entry, checking it as onAppend does.
func (w *vsmWorker) entry(it pickle.Value, keys []string, vals []pickle.Value) error {
	c := w.c
	var err error
	switch {
	case c.tag < 0:
		err = errors.New("an entry in a chunk of none") // listLen and the decoder disagree: cannot happen
	case w.n == 0 && c.first && (it.Kind != pickle.DictKind || !slices.Contains(keys, "action")):
		err = fmt.Errorf("device_traces[%d] holds %ss, not trace entries", c.f.Device, it.TypeName())
	case it.Kind != pickle.DictKind:
		err = fmt.Errorf("device trace %d: entry %d is a %s, not a dict", c.tag, c.seq+w.n, it.TypeName())
	default:
		err = w.d.flatEvent(&w.list, keys, vals)
	}
	w.n++
	if err != nil {
		return fmt.Errorf("VSM1 chunk at byte %d: %w", c.f.Offset, err)
	}
	return nil
}

// stackMap maps the stacks of a chunk's table to the shared table's, each
// the first time an event uses it: frames and stacks get their IDs in the
// order the pickle path gives them.
type stackMap struct {
	local  *profiler.Frames
	stacks []profiler.StackID // ID+1, 0: not mapped yet
	frames []profiler.FrameID // ID+1, 0: not mapped yet
	ids    []profiler.FrameID
}

func (m *stackMap) reset(local *profiler.Frames) {
	m.local = local
	m.stacks = slices.Grow(m.stacks[:0], local.NumStacks())[:local.NumStacks()]
	m.frames = slices.Grow(m.frames[:0], local.NumFrames())[:local.NumFrames()]
	clear(m.stacks)
	clear(m.frames)
}

func (m *stackMap) global(s profiler.StackID, into *profiler.Frames) profiler.StackID {
	if s == 0 {
		return 0 // the empty stack
	}
	if g := m.stacks[s]; g > 0 {
		return g - 1
	}
	ids := m.ids[:0]
	for _, f := range m.local.StackAt(s) {
		g := m.frames[f]
		if g == 0 {
			g = into.Frame(m.local.FrameAt(f)) + 1
			m.frames[f] = g
		}
		ids = append(ids, g-1)
	}
	m.ids = ids
	g := into.Stack(ids)
	m.stacks[s] = g + 1
	return g
}
