package pickle

// readTable counts one part's memo reads in pages of 64K slots, allocated as
// the part first reads a slot in them. A part reads slots anywhere below its
// position, so a dense table per part spans nearly every slot: with one per
// core the planning pass took the number of slots times the number of cores
// (320 MiB for the 5M-entry snapshot on a 16-core host, 78 MiB on 2). A part
// reads mostly the slots its own bytes wrote plus a few lasting ones (dict
// keys, frames), so its pages cover about its own share of the slots and the
// parts together about one byte per slot, whatever the core count.
type readTable struct {
	pages []*readPage
}

// pageSlots is the number of counters in one page (64 KiB).
const pageSlots = 1 << 16

type readPage [pageSlots]uint8

// add counts one read of slot id, saturating at 255.
func (t *readTable) add(id uint64) {
	i := id / pageSlots
	if i >= uint64(len(t.pages)) || t.pages[i] == nil {
		t.grow(i)
	}
	if c := &t.pages[i][id%pageSlots]; *c < 255 {
		*c++
	}
}

// grow makes page i exist.
func (t *readTable) grow(i uint64) {
	for uint64(len(t.pages)) <= i {
		t.pages = append(t.pages, nil)
	}
	if t.pages[i] == nil {
		t.pages[i] = new(readPage)
	}
}

// merge adds o's counts into t (saturating at 255) and empties o, so the
// pages of a merged part can be collected before the next part is merged.
func (t *readTable) merge(o *readTable) {
	for i, pg := range o.pages {
		if pg == nil {
			continue
		}
		if i >= len(t.pages) || t.pages[i] == nil {
			t.grow(uint64(i))
			t.pages[i] = pg
			continue
		}
		dst := t.pages[i]
		for j, n := range pg {
			if n != 0 {
				dst[j] = uint8(min(int(dst[j])+int(n), 255))
			}
		}
	}
	o.pages = nil
}

// counts returns the counters of slots [0, n) as bytes, and whether every
// counter from n on is zero (a slot at or past n is read but never written).
// It empties t.
func (t *readTable) counts(n uint64) ([]uint8, bool) {
	out := make([]uint8, n)
	clean := true
	for i, pg := range t.pages {
		if pg == nil {
			continue
		}
		first := uint64(i) * pageSlots
		if first < n {
			copy(out[first:], pg[:])
		}
		for j := max(first, n) - first; j < pageSlots; j++ {
			clean = clean && pg[j] == 0
		}
	}
	t.pages = nil
	return out, clean
}
