package analyze

import (
	"fmt"

	"github.com/vramscope/vramscope/profiler"
)

// Finding is a diagnosis: what is wrong, the evidence, and what to change.
type Finding struct {
	Kind     string   `json:"kind"`
	Severity string   `json:"severity"` // "error", "warning" or "info"
	Title    string   `json:"title"`
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Cause    string   `json:"cause,omitempty"`
	Evidence Evidence `json:"evidence"`
	Fix      string   `json:"fix"`
}

// Evidence backs a finding with numbers, source lines and a time range.
type Evidence struct {
	Numbers map[string]int64 `json:"numbers,omitempty"`
	Lines   []EvidenceLine   `json:"lines,omitempty"`
	StartUS int64            `json:"start_us,omitempty"`
	EndUS   int64            `json:"end_us,omitempty"`
}

// EvidenceLine is a source line that a finding points at.
type EvidenceLine struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Bytes int64  `json:"bytes"`
	Note  string `json:"note"`
}

// OOM is an out-of-memory event in a trace, with the state around it.
type OOM struct {
	Device     int              `json:"device"`
	TimeUS     int64            `json:"time_us"`
	Requested  int64            `json:"requested"`
	Allocated  int64            `json:"allocated"`
	Reserved   int64            `json:"reserved"`
	DeviceFree uint64           `json:"device_free"`
	File       string           `json:"file"`
	Line       int              `json:"line"`
	Function   string           `json:"function"`
	Frames     []profiler.Frame `json:"frames"` // root first
}

func (a *analysis) ooms(t *tracker, d Device) []OOM {
	var out []OOM
	for _, e := range t.ooms {
		o := OOM{Device: d.Device, TimeUS: e.timeUS, Requested: e.requested, DeviceFree: e.deviceFree,
			Allocated: d.Allocator.Allocated - (t.cur - e.cur), Reserved: reservedAt(d, e.rcur, t.rcur),
			Frames: a.origins.stackPath(e.stack)}
		if f, ok := a.origins.userFrame(e.stack); ok {
			o.File, o.Line, o.Function = f.File, f.Line, f.Func
		}
		out = append(out, o)
	}
	return out
}

// reservedAt turns a replayed reserved level into bytes using the end state
// (allocated bytes at an OOM are anchored the same way: the snapshot's
// segments give exact block sizes at the end, so PyTorch's own OOM message
// and these figures agree).
func reservedAt(d Device, rcur, rend int64) int64 {
	return d.Allocator.Reserved - rend + rcur
}

// findings derives what the snapshot alone shows. The diagnosis engine adds
// more kinds; every front end reads them from here.
func findings(r *Result) []Finding {
	var out []Finding
	for _, o := range r.OOMs {
		out = append(out, oomFinding(r, o))
	}
	return out
}

func oomFinding(r *Result, o OOM) Finding {
	cached := o.Reserved - o.Allocated
	cause := "capacity"
	switch {
	case cached >= o.Requested:
		cause = "fragmentation"
	case o.Allocated > 0 && o.Requested*5 >= o.Allocated:
		cause = "large_allocation"
	}
	f := Finding{
		Kind: "oom", Severity: "error", Cause: cause, File: o.File, Line: o.Line,
		Title: fmt.Sprintf("CUDA out of memory: %s requested with %s allocated and %s reserved",
			profiler.FormatBytes(o.Requested), profiler.FormatBytes(o.Allocated), profiler.FormatBytes(o.Reserved)),
		Evidence: Evidence{
			Numbers: map[string]int64{"requested": o.Requested, "allocated": o.Allocated, "reserved": o.Reserved,
				"reserved_unallocated": cached, "device_free": int64(o.DeviceFree)},
			StartUS: o.TimeUS, EndUS: o.TimeUS,
		},
	}
	if o.File != "" {
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: o.File, Line: o.Line, Bytes: o.Requested, Note: "the failing request"})
	}
	switch cause {
	case "fragmentation":
		f.Fix = "enough memory was cached but not in one piece: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
	case "large_allocation":
		f.Fix = "one request is a large share of the device: compute it in chunks (e.g. the loss over slices of the sequence) or lower the batch size"
	default:
		f.Fix = "the working set does not fit: lower the batch size, enable gradient checkpointing, or shard the model and optimizer state"
	}
	return f
}
