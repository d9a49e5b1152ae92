package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

var fb = profiler.FormatBytes

// writeSummary prints what an engineer reads first: the peak, who holds it,
// the allocator's state, any OOM and the findings.
func writeSummary(w io.Writer, r *analyze.Result, top int) {
	fmt.Fprintf(w, "%s: %d trace events, %s\n", r.File, r.Events, fb(r.Bytes))
	for _, d := range r.Devices {
		dur := time.Duration(d.EndUS-d.StartUS) * time.Microsecond
		fmt.Fprintf(w, "device %d: peak %s at %+.3fs into the trace (event %d of %d, trace spans %s)\n",
			d.Device, fb(d.Peak.Bytes), float64(d.Peak.TimeUS-d.StartUS)/1e6, d.Peak.Seq, d.Events, dur.Round(time.Millisecond))
		if d.PreTraceBytes > 0 {
			fmt.Fprintf(w, "  %s were allocated before the trace began\n", fb(d.PreTraceBytes))
		}
	}
	c := r.Coverage
	fmt.Fprintf(w, "attribution of memory live at the peak: %.1f%% named (%s on user lines, %s on phases, %s on named tensors); %s allocated before recording and not named, %s library-only\n",
		100*c.Attributed, fb(c.UserLine), fb(c.Phase), fb(c.Tensor), fb(c.Unknown), fb(c.Library))

	fmt.Fprintf(w, "\nTop lines at the peak (first frame in your code):\n")
	writeSites(w, r.Sites, top)
	fmt.Fprintf(w, "\nTop stacks at the peak:\n")
	for i, s := range r.Stacks {
		if i >= min(top, 5) || s.PeakBytes == 0 {
			break
		}
		fmt.Fprintf(w, "  %10s  %s\n", fb(s.PeakBytes), condense(s.Frames))
	}
	for _, d := range r.Devices {
		writeAllocator(w, d)
	}
	for _, o := range r.OOMs {
		fmt.Fprintf(w, "\nOut of memory on device %d: %s requested at %s:%d (%s) with %s allocated, %s reserved\n",
			o.Device, fb(o.Requested), o.File, o.Line, o.Function, fb(o.Allocated), fb(o.Reserved))
		if c := o.CapText(); c != "" {
			fmt.Fprintf(w, "  the device had %s free: the process ran into %s "+
				"(torch.cuda.set_per_process_memory_fraction), not the device's capacity\n", fb(int64(o.DeviceFree)), c)
		}
	}
	writeTensors(w, r.Tensors, top)
	fmt.Fprintf(w, "\nFindings:\n")
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "  [%s] %s: %s\n", f.Severity, f.Kind, f.Title)
		if f.File != "" {
			fmt.Fprintf(w, "      at %s:%d\n", f.File, f.Line)
		}
		fmt.Fprintf(w, "      fix: %s\n", f.Fix)
	}
}

func writeSites(w io.Writer, sites []analyze.Site, top int) {
	fmt.Fprintf(w, "  %10s %6s %10s %7s %10s  %s\n", "at peak", "share", "allocated", "allocs", "largest", "line")
	for i, s := range sites {
		if i >= top {
			break
		}
		where := s.Function
		if s.File != "" {
			where = fmt.Sprintf("%s:%d (%s)", s.File, s.Line, s.Function)
		}
		fmt.Fprintf(w, "  %10s %5.1f%% %10s %7d %10s  %s\n", fb(s.PeakBytes), 100*s.PeakShare, fb(s.AllocBytes), s.Allocs, fb(s.MaxAlloc), where)
	}
}

func writeAllocator(w io.Writer, d analyze.Device) {
	a := d.Allocator
	fmt.Fprintf(w, "\nAllocator at snapshot time (device %d): %s reserved in %d segments, %s allocated, %s free in %d blocks (largest %s), %s rounding waste",
		d.Device, fb(a.Reserved), a.Segments, fb(a.Allocated), fb(a.ExternalFree), a.FreeBlocks, fb(a.LargestFreeBlock), fb(a.InternalFree))
	if a.PendingFree > 0 {
		fmt.Fprintf(w, ", %s pending free", fb(a.PendingFree))
	}
	fmt.Fprintf(w, "\n  expandable segments: %v (setting %v); private-pool segments: %d; fragmentation %.0f%%\n",
		a.ExpandableSegs, a.ExpandableSetting, a.PrivatePoolSegs, 100*a.Fragmentation)
	if a.ExternalFree > 0 {
		fmt.Fprintf(w, "  (fragmentation: the free memory inside segments, %s, is in pieces; the largest, %s, is the biggest request "+
			"served without a new segment. It matters only near the device's or the cap's limit, when an OOM finds memory "+
			"reserved but none of it in one piece; otherwise the allocator reserves more.)\n", fb(a.ExternalFree), fb(a.LargestFreeBlock))
	}
}

// condense shows a stack as its user frames and the allocating frame.
func condense(frames []profiler.Frame) string {
	var parts []string
	for i, f := range frames {
		if profiler.IsUserFile(f.File) || f.File == "" || i == len(frames)-1 {
			if f.File == "" {
				parts = append(parts, f.Func)
			} else {
				parts = append(parts, fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line))
			}
		}
	}
	return strings.Join(parts, " > ")
}

// writeTensors prints what the agent named among the blocks alive when the
// snapshot was taken (at an OOM: what filled the device).
func writeTensors(w io.Writer, t *analyze.Tensors, top int) {
	if t == nil {
		return
	}
	fmt.Fprintf(w, "\nNamed tensors when the snapshot was taken (the agent named %d storages in %.0f ms%s):\n", t.Entries, t.TookMS, map[bool]string{true: ", stopped early", false: ""}[t.Truncated])
	fmt.Fprintf(w, "  %.1f%% of the %s alive is named: %s by tensor, %s by a user line or phase\n",
		100*t.NamedShare, fb(t.LiveBytes), fb(t.NamedBytes), fb(t.LineBytes))
	for i, g := range t.Groups {
		if i >= top {
			break
		}
		where := ""
		if g.File != "" {
			where = fmt.Sprintf(" at %s:%d", filepath.Base(g.File), g.Line)
		}
		if g.Growing {
			where += ", a cache that grows"
		}
		fmt.Fprintf(w, "  %10s  %-15s %s (%d)%s\n", fb(g.Bytes), g.Kind, g.Name, g.Tensors, where)
	}
}
