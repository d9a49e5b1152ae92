package analyze

import (
	"fmt"
	"strings"
)

// oomFinding reports one OOM event with the state around it and its cause:
// the finding kind that explains it, decided from the evidence in this order —
// unbounded_cache (a holder the agent named at the failure is a cache that
// grows and holds a quarter or more of the memory: growingHolder; ahead of
// fragmentation, which a cache of ever new sizes also causes and which
// expandable segments would only put off), fragmentation (enough was
// cached, not in one piece), leak (memory grew step
// after step until it ran out), large_allocation (one request is a large share
// of what was needed), activation_peak (activations saved for backward are
// most of it), optimizer_state (optimizer state is most of it), and otherwise
// capacity (the working set, spread over many tensors, does not fit).
func (dg *devDiag) oomFinding(i int, leak bool) Finding {
	od := dg.ooms[i]
	o := od.o
	cached := o.Reserved - o.Allocated
	need := o.Allocated + o.Requested
	cause := "capacity"
	grows := dg.growingHolder(od)
	switch {
	case grows != nil:
		cause = KindUnboundedCache
	case od.frag:
		cause = KindFragmentation
	case leak:
		cause = KindLeak
	case od.large:
		cause = KindLargeAllocation
	case od.act:
		cause = KindActivationPeak
	case od.cats != nil && 2*catBytes(od.cats, CatOptimizerState) >= need:
		cause = KindOptimizerState
	}
	f := Finding{
		Kind: KindOOM, Severity: "error", Cause: cause, File: o.File, Line: o.Line,
		Title: fmt.Sprintf("CUDA out of memory: %s requested with %s allocated and %s reserved (cause: %s)",
			fb(o.Requested), fb(o.Allocated), fb(o.Reserved), cause),
		Evidence: Evidence{
			Numbers: map[string]int64{"requested": o.Requested, "allocated": o.Allocated, "reserved": o.Reserved,
				"reserved_unallocated": cached, "device_free": int64(o.DeviceFree)},
			StartUS: o.TimeUS, EndUS: o.TimeUS,
		},
	}
	for _, c := range od.cats {
		f.Evidence.Numbers["allocated_"+c.Name] = c.Bytes
	}
	if c := o.CapText(); c != "" {
		f.Title += fmt.Sprintf("; the device had %s free: %s refused it (torch.cuda.set_per_process_memory_fraction)",
			fb(int64(o.DeviceFree)), c)
		if o.Cap > 0 {
			f.Evidence.Numbers["process_cap"] = o.Cap
		} else {
			f.Evidence.Numbers["process_cap_at_most"] = o.CapAtMost
		}
	}
	dg.namedEvidence(&f, od)
	if od.atEnd {
		f.Evidence.Numbers["largest_free_block"] = dg.d.Allocator.LargestFreeBlock
	}
	if o.File != "" {
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: o.File, Line: o.Line, Bytes: o.Requested, Note: "the failing request"})
	}
	if n := len(o.Frames); n > 0 && o.Frames[n-1].File != o.File {
		in := o.Frames[n-1]
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: in.File, Line: in.Line, Bytes: o.Requested,
			Note: "allocating frame (" + in.Func + ")"})
	}
	switch cause {
	case KindFragmentation:
		f.Fix = fragFix(dg.r.Settings.ExpandableSegments || dg.d.Allocator.ExpandableSegs > 0)
	case KindUnboundedCache:
		f.Fix = growingFix(grows)
	case KindLeak:
		f.Fix = "memory grew every step until it ran out: see the leak finding for the lines whose blocks are never freed"
	case KindLargeAllocation:
		f.Fix = largeFix(o.Frames)
	case KindActivationPeak:
		f.Fix = "activations saved for backward fill the device: see the activation_peak finding; checkpoint the repeated blocks or lower the batch size"
	case KindOptimizerState:
		f.Fix = optimizerFix(dg.optName)
	default:
		f.Fix = "the working set does not fit: lower the batch size, enable gradient checkpointing, or shard the model and optimizer state"
	}
	dg.oomKV(&f, od) // the batch and length that fit lead the fix
	if f.Evidence.Numbers["fit_max_batch"] == 0 {
		dg.oomPlan(&f, od, i == len(dg.ooms)-1)
	}
	return f
}

// namedEvidence adds, for an OOM whose snapshot the agent took at the failure
// and named, what filled the device: the largest named groups, in the title
// and as evidence (a local's own line among the evidence lines).
func (dg *devDiag) namedEvidence(f *Finding, od oomDiag) {
	t := dg.r.Tensors
	if t == nil || !od.atEnd || len(t.Groups) == 0 {
		return
	}
	var parts []string
	for i, g := range t.Groups {
		if i == 5 {
			break
		}
		f.Evidence.Tensors = append(f.Evidence.Tensors, g)
		if i < 3 {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", fb(g.Bytes), strings.ReplaceAll(g.Kind, "_", " "), g.Name))
		}
		f.Evidence.Lines = append(f.Evidence.Lines, g.evidenceLines()...)
	}
	f.Evidence.Numbers["named"] = t.NamedBytes + t.LineBytes
	f.Title += fmt.Sprintf("; filled by %s; %.0f%% of the memory named", strings.Join(parts, ", "), 100*t.NamedShare)
}

// growingShare: a growing holder is the OOM's cause when it holds at least
// this share of the memory alive at the failure. The caches of the measured
// OOM programs held 60-90% (docs/oom-naming.md); a quarter leaves room for a
// model whose parameters and optimizer state are most of the device.
const growingShare = 0.25

// growingHolder is the largest named group that is a cache that grows
// (TensorGroup.Growing), for an OOM whose snapshot the agent named at the
// failure, if it holds growingShare of the live memory; else nil.
func (dg *devDiag) growingHolder(od oomDiag) *TensorGroup {
	t := dg.r.Tensors
	if t == nil || !od.atEnd || t.LiveBytes <= 0 {
		return nil
	}
	for i := range t.Groups {
		if g := &t.Groups[i]; g.Growing {
			if float64(g.Bytes) >= growingShare*float64(t.LiveBytes) {
				return g
			}
			return nil
		}
	}
	return nil
}

// growingFix names the cache that grows, where it is held and the line that fills it.
func growingFix(g *TensorGroup) string {
	where := ""
	if g.File != "" && g.Line > 0 {
		where = fmt.Sprintf(" (%s:%d)", g.File, g.Line)
	}
	return fmt.Sprintf("a cache that grows: %s%s holds %d tensors of one shape family, %s%s; "+
		"bound it (evict old entries, functools.lru_cache(maxsize=...), fewer distinct keys) or clear it",
		g.Name, where, g.Tensors, fb(g.Bytes), g.madeText())
}
