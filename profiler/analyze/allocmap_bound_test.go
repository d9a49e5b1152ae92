package analyze

import "testing"

// A map of more blocks than maxMapBlocks is drawn with runs of narrow blocks
// merged: under the bound, still tiling each segment, no byte lost, and the
// wide blocks (the ones a reader sees) kept as they were.
func TestAllocMapBounded(t *testing.T) {
	mb := newMapBuilder(nil, "snapshot", 0)
	seg := AllocSegment{Addr: 1 << 30, Size: 0}
	var allocated int64
	for i := 0; i < 3*maxMapBlocks; i++ {
		b := AllocBlock{Offset: seg.Size, Size: 512, State: "allocated", Requested: 500}
		if i%2 == 1 {
			b.State = "inactive_split"
		}
		if i%1000 == 0 {
			b.Size = 64 << 20 // a wide block every thousand
		}
		if b.State == "allocated" {
			allocated += b.Size
		}
		seg.Blocks = append(seg.Blocks, b)
		seg.Size += b.Size
	}
	mb.add(seg)
	m := mb.finish()
	blocks := m.Segments[0].Blocks
	if len(blocks) > maxMapBlocks || m.Merged == 0 {
		t.Fatalf("%d blocks (%d merged), want at most %d", len(blocks), m.Merged, maxMapBlocks)
	}
	var at, alloc int64
	wide := 0
	for _, b := range blocks {
		if b.Offset != at {
			t.Fatalf("block at %d, want %d", b.Offset, at)
		}
		at += b.Size
		switch b.State {
		case "allocated":
			alloc += b.Size
		case "mixed":
			alloc += b.Allocated
		}
		if b.Size == 64<<20 && b.Merged == 0 {
			wide++
		}
	}
	if at != seg.Size || alloc != allocated || m.Allocated != allocated {
		t.Errorf("covered %d of %d; allocated %d (map %d), want %d", at, seg.Size, alloc, m.Allocated, allocated)
	}
	if wide != 3*maxMapBlocks/1000 {
		t.Errorf("%d wide blocks kept apart, want %d", wide, 3*maxMapBlocks/1000)
	}
}

// More segments than maxMapBlocks (one block each: nothing to merge) end, and
// keep the largest segments.
func TestAllocMapManySegments(t *testing.T) {
	mb := newMapBuilder(nil, "snapshot", 0)
	for i := 0; i < maxMapBlocks+10; i++ {
		size := int64(2 << 20)
		if i%100 == 0 {
			size = 20 << 20
		}
		mb.add(AllocSegment{Addr: uint64(i) << 32, Size: size, Blocks: []AllocBlock{{Size: size, State: "free"}}})
	}
	m := mb.finish()
	if len(m.Segments) != maxMapBlocks || m.OmittedSegments != 10 {
		t.Fatalf("%d segments drawn, %d omitted", len(m.Segments), m.OmittedSegments)
	}
	big := 0
	for i, s := range m.Segments {
		if s.Size == 20<<20 {
			big++
		}
		if i > 0 && s.Addr <= m.Segments[i-1].Addr {
			t.Fatal("segments out of address order")
		}
	}
	if big != (maxMapBlocks+10+99)/100 {
		t.Errorf("%d large segments kept", big)
	}
}
