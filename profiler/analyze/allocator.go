package analyze

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
)

// Allocator is the caching allocator's state when the snapshot was taken.
//
// Free memory comes in two kinds: internal (inside allocated blocks, the
// rounding between what was requested and the block size) and external
// (inactive blocks: reserved from the driver but not handed out). External free
// that is split across many small blocks is what fragmentation means.
type Allocator struct {
	Reserved          int64          `json:"reserved"`
	Allocated         int64          `json:"allocated"` // active_allocated + pending free blocks
	Requested         int64          `json:"requested"`
	PendingFree       int64          `json:"pending_free"`
	InternalFree      int64          `json:"internal_free"`
	ExternalFree      int64          `json:"external_free"`
	LargestFreeBlock  int64          `json:"largest_free_block"`
	FreeBlocks        int            `json:"free_blocks"`
	Segments          int            `json:"segments"`
	PartlyUsed        int            `json:"partly_used_segments"`
	ExpandableSegs    int            `json:"expandable_segments"`
	PrivatePoolSegs   int            `json:"private_pool_segments"`
	ExpandableSetting bool           `json:"expandable_setting"`
	Fragmentation     float64        `json:"fragmentation"` // 1 - largest free block / external free
	PerSegment        []SegmentState `json:"per_segment"`
}

// SegmentState is one segment's row.
type SegmentState struct {
	Addr             uint64   `json:"address"`
	Size             int64    `json:"size"`
	Allocated        int64    `json:"allocated"`
	Free             int64    `json:"free"`
	LargestFreeBlock int64    `json:"largest_free_block"`
	Blocks           int      `json:"blocks"`
	Stream           int64    `json:"stream"`
	Type             string   `json:"type"`
	Expandable       bool     `json:"expandable"`
	Pool             [2]int64 `json:"pool"`
}

func allocatorState(segs []profiler.Segment, set profiler.Settings) Allocator {
	var a Allocator
	a.ExpandableSetting = set.ExpandableSegments
	for _, s := range segs {
		row := SegmentState{Addr: s.Addr, Size: int64(s.TotalSize), Blocks: len(s.Blocks), Stream: s.Stream,
			Type: s.Type, Expandable: s.Expandable, Pool: s.PoolID}
		for _, b := range s.Blocks {
			size := int64(b.Size)
			switch b.State {
			case profiler.BlockInactive:
				row.Free += size
				row.LargestFreeBlock = max(row.LargestFreeBlock, size)
				a.FreeBlocks++
			case profiler.BlockActivePendingFree:
				a.PendingFree += size
				row.Allocated += size
			default:
				row.Allocated += size
				a.Requested += int64(b.Requested)
				a.InternalFree += size - int64(b.Requested)
			}
		}
		a.Reserved += row.Size
		a.Allocated += row.Allocated
		a.ExternalFree += row.Free
		a.LargestFreeBlock = max(a.LargestFreeBlock, row.LargestFreeBlock)
		a.Segments++
		if row.Allocated > 0 && row.Free > 0 {
			a.PartlyUsed++
		}
		if s.Expandable {
			a.ExpandableSegs++
		}
		if s.PrivatePool() {
			a.PrivatePoolSegs++
		}
		a.PerSegment = append(a.PerSegment, row)
	}
	if a.ExternalFree > 0 {
		a.Fragmentation = 1 - float64(a.LargestFreeBlock)/float64(a.ExternalFree)
	}
	sort.Slice(a.PerSegment, func(i, j int) bool { return a.PerSegment[i].Addr < a.PerSegment[j].Addr })
	return a
}
