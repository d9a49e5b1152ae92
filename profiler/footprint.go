package profiler

import "unsafe"

// MapEntryBytes is what a map entry costs beyond its key and value, on
// average over a map's load (its slot, control bytes and spare room): the
// figure caches use to weigh what they keep.
const MapEntryBytes = 40

// Footprint estimates the bytes the table holds: its frames and stacks and
// the indexes of both. Names are counted per frame, though frames of one
// file share its name: the estimate errs high.
func (t *Frames) Footprint() int64 {
	frame := int64(unsafe.Sizeof(Frame{}))
	n := int64(cap(t.frames))*frame + int64(len(t.frames))*(frame+4+MapEntryBytes)
	for _, f := range t.frames {
		n += int64(len(f.File) + len(f.Func))
	}
	n += int64(cap(t.stacks)) * int64(unsafe.Sizeof([]FrameID{}))
	for _, s := range t.stacks {
		n += int64(cap(s))*4 + int64(len(s))*4 + 16 + 4 + MapEntryBytes // the stack and its key in stackIdx
	}
	return n
}
