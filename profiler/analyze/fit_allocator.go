package analyze

import "sort"

// fit_allocator.go is a model of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp, default settings, one stream), run on
// a trace whose sizes were scaled: what it reserves from the device, and
// what torch.cuda.max_memory_allocated counts (whole blocks: a large block
// is not split when less than 1 MiB would remain, and that remainder counts).
//
// Requests of at most 1 MiB come from 2 MiB segments (the small pool);
// larger ones from 20 MiB segments below 10 MiB, else from a segment of the
// request rounded up to 2 MiB. The smallest free block that fits is taken
// (best fit), split when the rest is worth keeping, and a freed block merges
// with free neighbours of its segment. Segments go back to the device only
// when a request would pass the limit (the cap or the device): then every
// wholly free segment is released first. With expandable segments one
// segment a pool grows by 2 MiB pages instead.

const (
	allocSmall     = 1 << 20  // kSmallSize
	allocSmallSeg  = 2 << 20  // kSmallBuffer
	allocLargeSeg  = 20 << 20 // kLargeBuffer
	allocMinLarge  = 10 << 20 // kMinLargeAlloc
	allocRoundUp   = 2 << 20  // kRoundLarge, and the page of expandable segments
	allocMinSmallB = 512      // kMinBlockSize
)

type simBlock struct {
	seg        *simSegment
	off, size  int64
	free       bool
	prev, next *simBlock
}

type simSegment struct {
	size  int64
	first *simBlock
	small bool
}

type simPool struct {
	free []*simBlock // by size, then by segment order of creation
	segs []*simSegment
}

// simAllocator replays allocations and frees.
type simAllocator struct {
	expandable          bool
	limit               int64 // 0: none
	pools               [2]simPool
	reserved, allocated int64
	peakReserved        int64
	peakAllocated       int64
	oom                 bool
	// unmapped is free memory of the expandable segment whose pages were
	// given back at the limit; a block taken from it maps them again.
	unmapped int64
}

func (s *simAllocator) pool(size int64) *simPool {
	if size <= allocSmall {
		return &s.pools[0]
	}
	return &s.pools[1]
}

// alloc returns the block for a request of size bytes (a multiple of 512),
// nil when the limit refuses it.
func (s *simAllocator) alloc(size int64) *simBlock {
	p := s.pool(size)
	b := p.take(size)
	if b != nil && s.expandable && !b.seg.small && s.unmapped > 0 {
		remap := min(size, s.unmapped)
		if s.limit > 0 && s.reserved+remap > s.limit {
			s.unmapFree(p)
		}
		if s.limit > 0 && s.reserved+remap > s.limit {
			p.put(b)
			s.oom = true
			return nil
		}
		s.unmapped -= remap
		s.reserved += remap
		s.peakReserved = max(s.peakReserved, s.reserved)
	}
	if b == nil {
		b = s.grow(p, size)
		if b == nil {
			s.oom = true
			return nil
		}
	}
	s.split(p, b, size)
	b.free = false
	s.allocated += b.size
	s.peakAllocated = max(s.peakAllocated, s.allocated)
	return b
}

// take removes and returns the smallest free block of at least size.
func (p *simPool) take(size int64) *simBlock {
	i := sort.Search(len(p.free), func(i int) bool { return p.free[i].size >= size })
	if i == len(p.free) {
		return nil
	}
	b := p.free[i]
	p.free = append(p.free[:i], p.free[i+1:]...)
	return b
}

func (p *simPool) put(b *simBlock) {
	i := sort.Search(len(p.free), func(i int) bool { return p.free[i].size >= b.size })
	p.free = append(p.free, nil)
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = b
}

func (p *simPool) remove(b *simBlock) {
	for i, f := range p.free {
		if f == b {
			p.free = append(p.free[:i], p.free[i+1:]...)
			return
		}
	}
}

// split keeps size bytes of b and returns the rest to the pool when it is
// worth a block of its own.
func (s *simAllocator) split(p *simPool, b *simBlock, size int64) {
	rest := b.size - size
	if (b.seg.small && rest < allocMinSmallB) || (!b.seg.small && rest <= allocSmall) {
		return
	}
	r := &simBlock{seg: b.seg, off: b.off + size, size: rest, free: true, prev: b, next: b.next}
	if b.next != nil {
		b.next.prev = r
	}
	b.next, b.size = r, size
	p.put(r)
}

// segmentSize is what cudaMalloc is asked for to serve a request.
func segmentSize(size int64) int64 {
	switch {
	case size <= allocSmall:
		return allocSmallSeg
	case size < allocMinLarge:
		return allocLargeSeg
	}
	return (size + allocRoundUp - 1) / allocRoundUp * allocRoundUp
}

// grow reserves memory for a request no free block serves: a new segment,
// or the last one extended (expandable). It releases the free segments
// first when the limit would be passed.
func (s *simAllocator) grow(p *simPool, size int64) *simBlock {
	if s.expandable && size > allocSmall && len(p.segs) > 0 {
		return s.extend(p, size)
	}
	seg := segmentSize(size)
	if s.limit > 0 && s.reserved+seg > s.limit {
		s.release()
		if s.reserved+seg > s.limit {
			return nil
		}
	}
	g := &simSegment{size: seg, small: size <= allocSmall}
	g.first = &simBlock{seg: g, size: seg, free: true}
	p.segs = append(p.segs, g)
	s.reserved += seg
	s.peakReserved = max(s.peakReserved, s.reserved)
	return g.first
}

// extend maps pages at the end of an expandable segment.
func (s *simAllocator) extend(p *simPool, size int64) *simBlock {
	g := p.segs[len(p.segs)-1]
	last := g.first
	for last.next != nil {
		last = last.next
	}
	need := size
	if last.free {
		need -= last.size
	}
	need = (need + allocRoundUp - 1) / allocRoundUp * allocRoundUp
	if s.limit > 0 && s.reserved+need > s.limit {
		s.unmapFree(p) // at the limit the free pages go back, as PyTorch unmaps them
		if s.reserved+need > s.limit {
			return nil
		}
	}
	s.reserved += need
	s.peakReserved = max(s.peakReserved, s.reserved)
	g.size += need
	if last.free {
		p.remove(last)
		last.size += need
		return last
	}
	b := &simBlock{seg: g, off: last.off + last.size, size: need, free: true, prev: last}
	last.next = b
	return b
}

// release gives back every wholly free segment (what the allocator does
// before it reports an out-of-memory error).
func (s *simAllocator) release() {
	for k := range s.pools {
		p := &s.pools[k]
		kept := p.segs[:0]
		for _, g := range p.segs {
			if g.first.free && g.first.next == nil {
				p.remove(g.first)
				s.reserved -= g.size
				continue
			}
			kept = append(kept, g)
		}
		p.segs = kept
	}
}

// free returns b, merged with its free neighbours.
func (s *simAllocator) free(b *simBlock) {
	s.allocated -= b.size
	p := &s.pools[1]
	if b.seg.small {
		p = &s.pools[0]
	}
	b.free = true
	if n := b.next; n != nil && n.free {
		p.remove(n)
		b.size += n.size
		b.next = n.next
		if n.next != nil {
			n.next.prev = b
		}
	}
	if q := b.prev; q != nil && q.free {
		p.remove(q)
		q.size += b.size
		q.next = b.next
		if b.next != nil {
			b.next.prev = q
		}
		b = q
	}
	p.put(b)
}

// seedFree adds n bytes of segments reserved before the trace and free,
// as one block of the large pool: a trace that began after the allocator
// had cached memory reuses it before it reserves more.
func (s *simAllocator) seedFree(n int64) {
	p := &s.pools[1]
	g := &simSegment{size: n}
	g.first = &simBlock{seg: g, size: n, free: true}
	p.segs = append(p.segs, g)
	p.put(g.first)
	s.reserved += n
	s.peakReserved = max(s.peakReserved, s.reserved)
}

// unmapFree gives back the pages of the expandable pool's free blocks.
func (s *simAllocator) unmapFree(p *simPool) {
	var free int64
	for _, b := range p.free {
		free += b.size
	}
	free -= s.unmapped
	free = free / allocRoundUp * allocRoundUp
	if free > 0 {
		s.reserved -= free
		s.unmapped += free
	}
}
