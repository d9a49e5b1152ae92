package analyze

import "github.com/vramscope/vramscope/profiler"

// pipe carries events from the decoding goroutine to the replay goroutine in
// batches, so the two passes overlap on two cores. Batches are recycled.
type pipe struct {
	a     *analysis
	cur   *batch
	full  chan *batch
	empty chan *batch
	done  chan struct{}
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

func (p *pipe) consume() {
	defer close(p.done)
	for b := range p.full {
		for i := 0; i < b.n; i++ {
			p.a.replay(int(b.trace[i]), &b.events[i], b.user[i])
		}
		b.n = 0
		p.empty <- b
	}
}

// close flushes the last batch and waits for the replay to finish.
func (p *pipe) close() {
	if p.cur != nil && p.cur.n > 0 {
		p.full <- p.cur
		p.cur = nil
	}
	close(p.full)
	<-p.done
}
