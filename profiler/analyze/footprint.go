package analyze

import (
	"unsafe"

	"github.com/vramscope/vramscope/profiler"
)

// Footprint estimates the bytes r holds, for a cache that weighs what it
// keeps (the daemon's analyses): the tables that grow with a snapshot's
// distinct lines and stacks (frames, origins, sites, the live set over
// time) and its allocator maps. The rest is bounded (timelines of
// MaxTimelinePoints, 20 top stacks) and under a megabyte. A snapshot of
// 300,000 lines of its own held 210 MB (TestFootprint measures the
// estimate against the heap).
func (r *Result) Footprint() int64 {
	n := int64(1 << 20)
	if r.frames != nil {
		n += r.frames.Footprint()
	}
	if r.origins != nil {
		n += r.origins.footprint()
	}
	n += int64(cap(r.Sites)+cap(r.LeafSites)) * int64(unsafe.Sizeof(Site{}))
	if r.moments != nil && r.moments.grid != nil {
		n += r.moments.grid.footprint()
	}
	for _, d := range r.Devices {
		if d.moments != nil && d.moments != r.moments && d.moments.grid != nil {
			n += d.moments.grid.footprint()
		}
	}
	for _, am := range r.AllocatorMaps {
		for _, m := range am.Maps {
			n += int64(len(m.Segments)) * int64(unsafe.Sizeof(AllocSegment{}))
			for _, s := range m.Segments {
				n += int64(len(s.Blocks)) * int64(unsafe.Sizeof(AllocBlock{}))
			}
		}
	}
	return n
}

func (o *origins) footprint() int64 {
	n := int64(cap(o.real)+cap(o.synO))*int64(unsafe.Sizeof(origin{})) + int64(cap(o.syn))*int64(unsafe.Sizeof(synthetic{}))
	n += int64(cap(o.userIdx)) + int64(len(o.gapIdx)+len(o.preIdx))*(16+profiler.MapEntryBytes)
	for i := range o.real {
		n += int64(len(o.real[i].cats)) * (24 + profiler.MapEntryBytes)
	}
	return n
}

func (g *momentGrid) footprint() int64 {
	n := int64(len(g.keyList)) * (2*int64(unsafe.Sizeof(momentKey{})) + 4 + profiler.MapEntryBytes)
	for _, b := range g.buckets {
		n += int64(cap(b)) * int64(unsafe.Sizeof(momentDelta{}))
	}
	return n
}
