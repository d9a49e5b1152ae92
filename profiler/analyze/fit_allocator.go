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
	if s.expandable && size > allocSmall && len(p.segs) > 0 {
		return s.allocExpandable(p, size)
	}
	b := p.take(size)
	if b == nil {
		b = s.grow(p, size)
		if b == nil {
			s.oom = true
			return nil
		}
	}
	s.split(p, b, size)
	s.taken(b)
	return b
}

func (s *simAllocator) taken(b *simBlock) {
	b.free = false
	s.allocated += b.size
	s.peakAllocated = max(s.peakAllocated, s.allocated)
}

// allocExpandable serves a request from the large pool's expandable
// segment: a free block, else pages mapped at the segment's end. The
// request's pages must be mapped: those of a free block are taken to be
// unmapped first (as far as any are). Past the limit every other free page
// is given back (PyTorch unmaps them and tries again), and the request fails
// only when what is then mapped and the request pass it.
func (s *simAllocator) allocExpandable(p *simPool, size int64) *simBlock {
	b := p.take(size)
	var grown int64 // bytes added to the segment
	if b == nil {
		b, grown = s.extend(p, size)
	}
	s.split(p, b, size)
	s.taken(b)
	remap := min(b.size-grown, s.unmapped) // the block's bytes that were free before, unmapped first
	s.unmapped -= remap
	s.reserved += grown + remap
	if s.limit > 0 && s.reserved > s.limit {
		s.unmapFree(p)
		if s.reserved > s.limit { // the request goes back, and the pages mapped for it
			s.free(b)
			s.unmapped += grown + remap
			s.reserved -= grown + remap
			s.oom = true
			return nil
		}
	}
	s.peakReserved = max(s.peakReserved, s.reserved)
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

// grow reserves a new segment for a request no free block serves. It
// releases the free segments first when the limit would be passed.
func (s *simAllocator) grow(p *simPool, size int64) *simBlock {
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

// extend adds pages at the end of the pool's expandable segment, enough
// for size with its free last block, and returns that block (out of the
// free list) and the bytes added; allocExpandable accounts for them.
func (s *simAllocator) extend(p *simPool, size int64) (*simBlock, int64) {
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
	g.size += need
	if last.free {
		p.remove(last)
		last.size += need
		return last, need
	}
	b := &simBlock{seg: g, off: last.off + last.size, size: need, free: true, prev: last}
	last.next = b
	return b, need
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

// unmapFree gives back the pages of the expandable pool's free blocks (what
// of them is still mapped, in whole pages).
func (s *simAllocator) unmapFree(p *simPool) {
	var free int64
	for _, b := range p.free {
		free += b.size
	}
	free = (free - s.unmapped) / allocRoundUp * allocRoundUp
	if free > 0 {
		s.reserved -= free
		s.unmapped += free
	}
}
