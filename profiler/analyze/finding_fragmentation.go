package analyze

import "fmt"

// fragShare: memory reserved but unallocated counts as "large" (PyTorch's OOM
// message: "if reserved but unallocated memory is large try ...
// expandable_segments") from a tenth of the reserved memory. A caching
// allocator routinely holds a few percent of its reserve in split remainders
// and rounding (4% at the peak of gpt2_train; 137 MiB of 3 GiB, 4.4%, when
// activation_oom failed, where that slack was not why it failed).
const fragShare = 0.10

// fragmentation reports an OOM that failed although the allocator held enough
// free memory for the request: reserved but unallocated at least the request
// and at least fragShare of the reserve, and (when the snapshot was taken at
// the failure, so its segments are the state then) no free block as large as
// the request.
func (dg *devDiag) fragmentation() []Finding {
	var out []Finding
	for i := range dg.ooms {
		od := &dg.ooms[i]
		o := od.o
		cached := o.Reserved - o.Allocated
		if cached < o.Requested || float64(cached) < fragShare*float64(o.Reserved) {
			continue
		}
		al := dg.d.Allocator
		if od.atEnd && al.LargestFreeBlock >= o.Requested {
			continue // a free block was large enough: not a matter of pieces
		}
		od.frag = true
		expandable := dg.r.Settings.ExpandableSegments || al.ExpandableSegs > 0
		f := Finding{
			Kind: KindFragmentation, Severity: "error", File: o.File, Line: o.Line,
			Title: fmt.Sprintf("Fragmentation: %s was reserved but unallocated, yet %s could not be allocated",
				fb(cached), fb(o.Requested)),
			Evidence: Evidence{
				Numbers: map[string]int64{"requested": o.Requested, "reserved": o.Reserved, "allocated": o.Allocated,
					"reserved_unallocated": cached, "reserved_unallocated_pct": pct(cached, o.Reserved)},
				StartUS: o.TimeUS, EndUS: o.TimeUS,
			},
			Fix: fragFix(expandable),
		}
		if od.atEnd {
			f.Title = fmt.Sprintf("Fragmentation: %s reserved but unallocated in %d free blocks, the largest %s, could not hold a request of %s",
				fb(cached), al.FreeBlocks, fb(al.LargestFreeBlock), fb(o.Requested))
			f.Evidence.Numbers["largest_free_block"] = al.LargestFreeBlock
			f.Evidence.Numbers["free_blocks"] = int64(al.FreeBlocks)
			f.Evidence.Numbers["segments"] = int64(al.Segments)
			f.Evidence.Numbers["partly_used_segments"] = int64(al.PartlyUsed)
		}
		if expandable {
			f.Evidence.Numbers["expandable_segments"] = 1
		}
		if o.File != "" {
			f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: o.File, Line: o.Line, Bytes: o.Requested, Note: "the failing request"})
		}
		out = append(out, f)
	}
	return out
}

func fragFix(expandable bool) string {
	if expandable {
		return "expandable_segments is already on (allocator_settings), so the free memory is split between live blocks: " +
			"allocate long-lived and large tensors first, reuse buffers instead of allocating many sizes (pad shapes to a few sizes), " +
			"or free what is no longer needed and call torch.cuda.empty_cache() between phases"
	}
	return "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (before CUDA initialises) so free pages can be mapped " +
		"into one range; also pad varying shapes to a few sizes so freed blocks are reused"
}
