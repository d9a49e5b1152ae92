package analyze_test

import (
	"testing"
)

// The allocator state is the snapshot's segments, summed independently.
func TestAllocatorState(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			for _, pf := range f.Devices {
				a := deviceOf(t, r, pf.Device).Allocator
				if a.Reserved != pf.Reserved {
					t.Errorf("reserved %d, segments sum to %d", a.Reserved, pf.Reserved)
				}
				if a.Segments != pf.Segments || len(a.PerSegment) != pf.Segments {
					t.Errorf("%d segments (%d rows), snapshot has %d", a.Segments, len(a.PerSegment), pf.Segments)
				}
				if a.Allocated != pf.ActiveBytes {
					t.Errorf("allocated %d, active blocks %d", a.Allocated, pf.ActiveBytes)
				}
				if a.ExternalFree != pf.ExternalFree || a.LargestFreeBlock != pf.LargestFreeBlock {
					t.Errorf("external free %d (largest %d), inactive blocks %d (largest %d)", a.ExternalFree, a.LargestFreeBlock, pf.ExternalFree, pf.LargestFreeBlock)
				}
				if a.LargestFreeBlock > a.ExternalFree {
					t.Errorf("largest free block %d > external free %d", a.LargestFreeBlock, a.ExternalFree)
				}
				if a.Allocated+a.ExternalFree != a.Reserved {
					t.Errorf("allocated %d + free %d != reserved %d", a.Allocated, a.ExternalFree, a.Reserved)
				}
				if a.ExpandableSegs != pf.ExpandableSegments || a.PrivatePoolSegs != pf.PrivatePoolSegments {
					t.Errorf("expandable %d, private pool %d; snapshot has %d, %d", a.ExpandableSegs, a.PrivatePoolSegs, pf.ExpandableSegments, pf.PrivatePoolSegments)
				}
				if a.ExpandableSetting != f.ExpandableSetting {
					t.Errorf("expandable_setting %v, allocator_settings say %v", a.ExpandableSetting, f.ExpandableSetting)
				}
				if a.Fragmentation < 0 || a.Fragmentation > 1 {
					t.Errorf("fragmentation %v outside [0, 1]", a.Fragmentation)
				}
				var rows, largest int64
				for i, s := range a.PerSegment {
					rows += s.Size
					largest = max(largest, s.LargestFreeBlock)
					if s.Allocated+s.Free != s.Size {
						t.Errorf("segment %#x: allocated %d + free %d != size %d", s.Addr, s.Allocated, s.Free, s.Size)
					}
					if i > 0 && s.Addr <= a.PerSegment[i-1].Addr {
						t.Errorf("per_segment not ordered by address at %d", i)
					}
				}
				if rows != a.Reserved || largest != a.LargestFreeBlock {
					t.Errorf("per_segment rows sum to %d (largest free %d), totals say %d (%d)", rows, largest, a.Reserved, a.LargestFreeBlock)
				}
			}
		})
	}
}

// What each recorded case was made to show.
func TestAllocatorCases(t *testing.T) {
	t.Run("expandable", func(t *testing.T) {
		a := result(t, "expandable").Devices[0].Allocator
		if a.ExpandableSegs == 0 || !a.ExpandableSetting {
			t.Errorf("expandable_segments:True run: %d expandable segments, setting %v", a.ExpandableSegs, a.ExpandableSetting)
		}
	})
	t.Run("cuda_graph", func(t *testing.T) {
		a := result(t, "cuda_graph").Devices[0].Allocator
		if a.PrivatePoolSegs == 0 {
			t.Error("CUDA graph capture: no private-pool segment")
		}
		if a.ExpandableSegs != 0 || a.ExpandableSetting {
			t.Errorf("cuda_graph: expandable %d, setting %v", a.ExpandableSegs, a.ExpandableSetting)
		}
	})
	t.Run("gpt2_train", func(t *testing.T) {
		a := result(t, "gpt2_train").Devices[0].Allocator
		if a.ExpandableSegs != 0 || a.PrivatePoolSegs != 0 || a.ExpandableSetting {
			t.Errorf("plain run: expandable %d, private pool %d, setting %v", a.ExpandableSegs, a.PrivatePoolSegs, a.ExpandableSetting)
		}
		// The sidecar's memory_stats were read right after the dump.
		if sc := readSidecar(t, "gpt2_train"); a.Reserved != sc.MaxReserved {
			t.Errorf("reserved %d, PyTorch reserved (no segment was ever freed) %d", a.Reserved, sc.MaxReserved)
		}
	})
}
