package analyze

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// largeShare: one request is a large allocation when it is at least a tenth
// of the memory in use at that moment (allocated + the request). A training
// step's working set is spread over hundreds of tensors: at the peaks of the
// recorded runs, leaving out the logits, the largest single block is 1-6%
// (an embedding and its gradient and moments, or cuBLAS's 32 MiB workspace in
// a small MLP). A tensor well above that does not scale with a layer but with
// a size the user chose (vocabulary x batch x sequence for logits, sequence
// squared for attention scores), and it is the one computation that can be
// restructured (chunked, fused) without touching the rest. The recorded
// failures sit far on either side: 23% (oom_batch, the fp32 logits) and 88%
// (attn_oom, attention scores) against 2% (activation_oom, one layer's output).
//
// Only a run under pressure gets the finding — an OOM, or (with the device
// memory known) a peak within nearCapacity of it: the logits of a healthy
// language-model run are 11-26% of its peak and nothing needs changing there.
const largeShare = 0.10

func (dg *devDiag) largeAllocation() []Finding {
	var out []Finding
	for i := range dg.ooms {
		od := &dg.ooms[i]
		o := od.o
		need := o.Allocated + o.Requested
		if od.frag || float64(o.Requested) < largeShare*float64(need) {
			continue
		}
		od.large = true
		f := Finding{Kind: KindLargeAllocation, Severity: "error", File: o.File, Line: o.Line,
			Evidence: Evidence{Numbers: map[string]int64{"bytes": o.Requested, "allocated": o.Allocated,
				"share_pct": pct(o.Requested, need)}, StartUS: o.TimeUS, EndUS: o.TimeUS},
			Fix: largeFix(o.Frames)}
		where := dg.short(o.File, o.Line)
		if n := len(o.Frames); n > 0 {
			in := o.Frames[n-1]
			if in.File != o.File || in.Line != o.Line {
				f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: in.File, Line: in.Line, Bytes: o.Requested,
					Note: "allocating frame (" + in.Func + ")"})
				where = dg.short(in.File, in.Line) + ", reached from " + dg.short(o.File, o.Line)
			}
		}
		if o.File != "" {
			f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: o.File, Line: o.Line, Bytes: o.Requested,
				Note: "your line (" + o.Function + ")"})
		}
		f.Title = fmt.Sprintf("One request of %s at %s is %d%% of the memory needed when it failed (%s allocated)",
			fb(o.Requested), where, pct(o.Requested, need), fb(o.Allocated))
		out = append(out, f)
	}
	capBytes, src := dg.capacity()
	if len(dg.ooms) > 0 || src != "given" || float64(dg.d.Peak.Bytes) < nearCapacity*float64(capBytes) {
		return out
	}
	var big *catBlock
	for i := range dg.peak {
		if big == nil || dg.peak[i].size > big.size {
			big = &dg.peak[i]
		}
	}
	peak := dg.d.Peak.Bytes
	if big == nil || float64(big.size) < largeShare*float64(peak) {
		return out
	}
	o := big.resolved()
	path := dg.a.origins.path(o)
	file, line, fn := dg.place(o)
	f := Finding{Kind: KindLargeAllocation, Severity: "warning", File: file, Line: line,
		Evidence: Evidence{Numbers: map[string]int64{"bytes": big.size, "peak": peak, "share_pct": pct(big.size, peak),
			"device_memory": capBytes}, StartUS: big.t, EndUS: dg.d.Peak.TimeUS},
		Fix: largeFix(path)}
	where := dg.short(file, line)
	if in, ok := dg.innermost(o); ok && (in.File != file || in.Line != line) {
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: in.File, Line: in.Line, Bytes: big.size,
			Note: "allocating frame (" + in.Func + ")"})
		where = dg.short(in.File, in.Line) + ", reached from " + dg.short(file, line)
	}
	if file != "" {
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: file, Line: line, Bytes: big.size, Note: "your line (" + fn + ")"})
	}
	f.Title = fmt.Sprintf("One block of %s at %s is %d%% of a peak that reaches %d%% of the device",
		fb(big.size), where, pct(big.size, peak), pct(peak, capBytes))
	return append(out, f)
}

// largeFix names the restructuring that fits the allocating code.
func largeFix(frames []profiler.Frame) string {
	for _, f := range frames {
		low := strings.ToLower(f.File + " " + f.Func)
		if strings.Contains(low, "loss") || strings.Contains(low, "cross_entropy") {
			return "the loss materialises the full logits (batch x sequence x vocabulary, upcast to fp32): compute it in chunks " +
				"over the sequence (a chunked or fused cross-entropy that never holds all logits), or lower the batch size or sequence length"
		}
	}
	return "compute this tensor in chunks (loop over the batch or the sequence and accumulate), use a kernel that never " +
		"materialises it (torch.nn.functional.scaled_dot_product_attention for attention scores), or lower the batch size or sequence length"
}
