package analyze

import (
	"sync/atomic"

	"github.com/vramscope/vramscope/profiler"
)

// pipe carries events from the decoding goroutine to the replay goroutine in
// batches, so the two passes overlap on two cores. Batches are recycled.
type pipe struct {
	a     *analysis
	cur   *batch
	full  chan *batch
	empty chan *batch
	done  chan struct{}
	// panicked is the replay's panic, turned into an error: the decoder
	// stops at its next event, and run returns it.
	panicked atomic.Pointer[PanicError]
	closed   bool
}

type batch struct {
	n      int
	trace  [batchSize]int32
	user   [batchSize]bool
	events [batchSize]profiler.Event
}

const batchSize = 4096

func (a *analysis) pipe() *pipe {
	p := &pipe{a: a, full: make(chan *batch, 4), empty: make(chan *batch, 4), done: make(chan struct{})}
	for i := 0; i < 4; i++ {
		p.empty <- &batch{}
	}
	go p.consume()
	return p
}

// event runs on the decoding goroutine. Whether a stack reaches user code is
// decided here because the decoder owns (and grows) the frame table.
func (p *pipe) event(trace int, e *profiler.Event) error {
	if pe := p.panicked.Load(); pe != nil {
		return pe
	}
	if p.cur == nil {
		p.cur = <-p.empty
	}
	b := p.cur
	b.trace[b.n] = int32(trace)
	b.user[b.n] = p.a.origins.hasUser(e.Stack)
	b.events[b.n] = *e
	b.n++
	if b.n == batchSize {
		p.full <- b
		p.cur = nil
	}
	return nil
}

// consume replays batches. A panic in the replay (a broken invariant, a
// hostile input the decoder let through) must not kill the process: it is
// kept as an error and the remaining batches are drained unreplayed, so the
// decoding goroutine never blocks on a full pipe.
func (p *pipe) consume() {
	defer close(p.done)
	for b := range p.full {
		if p.panicked.Load() == nil {
			p.replayBatch(b)
		}
		b.n = 0
		p.empty <- b
	}
}

func (p *pipe) replayBatch(b *batch) {
	defer func() {
		if r := recover(); r != nil {
			p.panicked.Store(newPanicError(r))
		}
	}()
	for i := 0; i < b.n; i++ {
		p.a.replay(int(b.trace[i]), &b.events[i], b.user[i])
	}
}

// close flushes the last batch and waits for the replay to finish; run
// also defers it, so that a panic while decoding does not leave the replay
// goroutine waiting for ever (a second call does nothing).
func (p *pipe) close() {
	if p.closed {
		return
	}
	p.closed = true
	if p.cur != nil && p.cur.n > 0 {
		p.full <- p.cur
		p.cur = nil
	}
	close(p.full)
	<-p.done
}

// err is the replay's panic as an error, or nil.
func (p *pipe) err() error {
	if pe := p.panicked.Load(); pe != nil {
		return pe
	}
	return nil
}
