package pickle

import "testing"

// Parts' counts add up, saturate at 255, and a count past the written slots
// is reported; each part holds only the pages it read.
func TestReadTableMerge(t *testing.T) {
	var a, b, all readTable
	for range 200 {
		a.add(3)
		b.add(3)
	}
	a.add(pageSlots + 7)
	b.add(5 * pageSlots)
	if n := pagesHeld(&a); n != 2 {
		t.Fatalf("part a holds %d pages, want 2 (slot 3's and slot %d's)", n, pageSlots+7)
	}
	all.merge(&a)
	all.merge(&b)
	if a.pages != nil || b.pages != nil {
		t.Fatal("merged parts still hold their pages")
	}
	got, clean := all.counts(5*pageSlots + 1)
	if !clean || got[3] != 255 || got[pageSlots+7] != 1 || got[5*pageSlots] != 1 || got[4] != 0 {
		t.Fatalf("counts: clean %v, [3]=%d [%d]=%d [%d]=%d", clean, got[3], pageSlots+7, got[pageSlots+7], 5*pageSlots, got[5*pageSlots])
	}
	var c readTable
	c.add(10)
	c.add(12)
	if _, clean := c.counts(11); clean {
		t.Fatal("slot 12 is read but only 11 slots are written: not reported")
	}
}

func pagesHeld(t *readTable) (n int) {
	for _, p := range t.pages {
		if p != nil {
			n++
		}
	}
	return n
}
