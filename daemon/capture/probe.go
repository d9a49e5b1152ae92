package capture

// probe.go: what the daemon's tests read and set of the cache's state, under
// its lock. Nothing else uses it.

// SetProgress sets each later decode's analyze.Options.Progress.
func (c *Analyses) SetProgress(f func(done, total int64)) {
	c.mu.Lock()
	c.progress = f
	c.mu.Unlock()
}

// SetMaxBytes sets the bytes of analyses kept in memory.
func (c *Analyses) SetMaxBytes(n int64) {
	c.mu.Lock()
	c.maxBytes = n
	c.mu.Unlock()
}

// Held is the bytes of the analyses in memory, the most allowed, and how
// many there are.
func (c *Analyses) Held() (bytes, maxBytes int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.maxBytes, c.lru.Len()
}

// Probe is one snapshot's entry, finished or running, as a test watches it.
type Probe struct {
	c *Analyses
	e *entry
}

// Probe is id's entry, or nil.
func (c *Analyses) Probe(id string) *Probe {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		return &Probe{c, el.Value.(*entry)}
	}
	return nil
}

// Waiters is how many requests wait for the decode.
func (p *Probe) Waiters() int {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.e.waiters
}

// Stopped says whether the decode was stopped (no request waits for it).
func (p *Probe) Stopped() bool {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.e.stopped
}

// Done is closed when the decode ends; Err is its error then.
func (p *Probe) Done() <-chan struct{} { return p.e.done }

// Err is the decode's error, once Done is closed.
func (p *Probe) Err() error { <-p.e.done; return p.e.err }
