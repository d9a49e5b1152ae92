package mcp

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

var fb = profiler.FormatBytes

// Details an analysis can be asked for beyond its summary.
var details = map[string]func(*strings.Builder, *analyze.Result, int){
	"summary":    writeSummary,
	"lines":      writeLines,
	"findings":   writeFindings,
	"tensors":    writeTensors,
	"steps":      writeSteps,
	"categories": writeCategories,
	"stacks":     writeStacks,
	"allocator":  writeAllocator,
}

// detailNames lists the details for the summary's last line and errors.
const detailNames = "summary, lines, findings, tensors, steps, categories, stacks, allocator"

// maxAnswer bounds an answer's text (about 6,000 tokens): a model's
// context is shared with the user's code.
const maxAnswer = 24 << 10

// answer writes one detail of r, cut at maxAnswer.
func answer(r *analyze.Result, detail string, top int) (string, error) {
	if detail == "" {
		detail = "summary"
	}
	write, ok := details[detail]
	if !ok {
		return "", fmt.Errorf("unknown detail %q: want one of %s", detail, detailNames)
	}
	var b strings.Builder
	write(&b, r, top)
	return cut(b.String()), nil
}

func cut(s string) string {
	if len(s) <= maxAnswer {
		return s
	}
	s = s[:maxAnswer]
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		s = s[:i+1]
	}
	return s + "… (cut to fit; ask for a smaller top)\n"
}

// writeSummary is what to read first: the peak, the out-of-memory error,
// the findings with their fixes, the top lines and the named tensors.
func writeSummary(b *strings.Builder, r *analyze.Result, top int) {
	fmt.Fprintf(b, "Snapshot %s: peak %s allocated on device %d; %d trace events.\n", r.File, fb(r.Peak.Bytes), r.Peak.Device, r.Events)
	for _, o := range r.OOMs {
		fmt.Fprintf(b, "Out of memory on device %d: %s requested at %s with %s allocated and %s reserved.\n",
			o.Device, fb(o.Requested), where(o.File, o.Line, o.Function), fb(o.Allocated), fb(o.Reserved))
	}
	b.WriteString("\n")
	writeFindings(b, r, 0)
	b.WriteString("\n")
	writeLines(b, r, min(top, 5))
	if r.Tensors != nil {
		b.WriteString("\n")
		writeTensors(b, r, min(top, 5))
	}
	fmt.Fprintf(b, "\nMore: analyze_snapshot with detail one of %s (and top N).\n", detailNames)
}

// writeFindings lists the findings; top > 0 adds their evidence.
func writeFindings(b *strings.Builder, r *analyze.Result, top int) {
	if len(r.Findings) == 0 {
		b.WriteString("Findings: none (no out-of-memory error, leak, cache growth or fragmentation found).\n")
		return
	}
	fmt.Fprintf(b, "Findings (%d):\n", len(r.Findings))
	for i, f := range r.Findings {
		fmt.Fprintf(b, "%d. [%s] %s: %s\n", i+1, f.Severity, f.Kind, f.Title)
		if f.Cause != "" {
			fmt.Fprintf(b, "   cause: %s\n", f.Cause)
		}
		if f.File != "" {
			fmt.Fprintf(b, "   at %s\n", where(f.File, f.Line, ""))
		}
		fmt.Fprintf(b, "   fix: %s\n", f.Fix)
		if top > 0 {
			writeEvidence(b, f.Evidence, top)
		}
	}
}

func writeEvidence(b *strings.Builder, e analyze.Evidence, top int) {
	keys := make([]string, 0, len(e.Numbers))
	for k := range e.Numbers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "   %s = %d\n", k, e.Numbers[k])
	}
	for i, l := range e.Lines {
		if i >= top {
			break
		}
		fmt.Fprintf(b, "   %s at %s %s\n", fb(l.Bytes), where(l.File, l.Line, ""), l.Note)
	}
	for i, t := range e.Tensors {
		if i >= top {
			break
		}
		fmt.Fprintf(b, "   tensor %s (%s): %s in %d\n", t.Name, t.Kind, fb(t.Bytes), t.Tensors)
	}
}

// writeLines lists the source lines that hold the most at the peak.
func writeLines(b *strings.Builder, r *analyze.Result, top int) {
	fmt.Fprintf(b, "Top lines at the peak (first frame in the user's code; %.0f%% of the peak named):\n", 100*r.Coverage.Attributed)
	for i, s := range r.Sites {
		if i >= top {
			break
		}
		fmt.Fprintf(b, "%d. %s (%.1f%%) at %s; %d allocations, largest %s\n",
			i+1, fb(s.PeakBytes), 100*s.PeakShare, where(s.File, s.Line, s.Function), s.PeakAllocs, fb(s.MaxAlloc))
	}
	if len(r.Sites) > top {
		fmt.Fprintf(b, "(%d more lines)\n", len(r.Sites)-top+r.SitesMore)
	}
}

// writeTensors lists what the agent named among the blocks alive.
func writeTensors(b *strings.Builder, r *analyze.Result, top int) {
	t := r.Tensors
	if t == nil {
		b.WriteString("Named tensors: none (the snapshot was not taken by the vramscope agent).\n")
		return
	}
	fmt.Fprintf(b, "Named tensors when the snapshot was taken: %.0f%% of %s alive named.\n", 100*t.NamedShare, fb(t.LiveBytes))
	for i, g := range t.Groups {
		if i >= top {
			break
		}
		at := ""
		if g.File != "" {
			at = " at " + where(g.File, g.Line, "")
		}
		fmt.Fprintf(b, "%d. %s %s (%s, %d tensors)%s\n", i+1, fb(g.Bytes), g.Name, g.Kind, g.Tensors, at)
	}
}

func writeSteps(b *strings.Builder, r *analyze.Result, top int) {
	if len(r.Steps) == 0 {
		b.WriteString("Steps: none found (no step annotations and no repeating loop).\n")
		return
	}
	fmt.Fprintf(b, "Steps (%d, from %s); allocated at each step's end:\n", len(r.Steps), r.StepSource)
	for i, s := range r.Steps {
		if i >= top {
			fmt.Fprintf(b, "(%d more steps)\n", len(r.Steps)-top)
			break
		}
		fmt.Fprintf(b, "step %d: %s\n", i, fb(s.LiveBytesAtEnd))
	}
}

func writeCategories(b *strings.Builder, r *analyze.Result, _ int) {
	b.WriteString("Memory at the peak by category:\n")
	for _, c := range r.Categories {
		if c.Bytes > 0 {
			fmt.Fprintf(b, "- %s: %s (%.0f%%)\n", c.Name, fb(c.Bytes), 100*c.Share)
		}
	}
}

func writeStacks(b *strings.Builder, r *analyze.Result, top int) {
	b.WriteString("Top stacks at the peak (root first, user frames and the allocating frame):\n")
	for i, s := range r.Stacks {
		if i >= top || s.PeakBytes == 0 {
			break
		}
		var parts []string
		for j, f := range s.Frames {
			if profiler.IsUserFile(f.File) || j == len(s.Frames)-1 {
				parts = append(parts, where(f.File, f.Line, f.Func))
			}
		}
		fmt.Fprintf(b, "%d. %s: %s\n", i+1, fb(s.PeakBytes), strings.Join(parts, " > "))
	}
}

func writeAllocator(b *strings.Builder, r *analyze.Result, _ int) {
	for _, d := range r.Devices {
		a := d.Allocator
		fmt.Fprintf(b, "Device %d when dumped: %s reserved in %d segments, %s allocated, %s free in %d blocks (largest %s); fragmentation %.0f%%; expandable segments %v.\n",
			d.Device, fb(a.Reserved), a.Segments, fb(a.Allocated), fb(a.ExternalFree), a.FreeBlocks, fb(a.LargestFreeBlock), 100*a.Fragmentation, a.ExpandableSegs)
	}
}

// where names a source line as file:line (function), the file's base name
// only when the path is long.
func where(file string, line int, fn string) string {
	if file == "" {
		return fn
	}
	s := fmt.Sprintf("%s:%d", shortPath(file), line)
	if fn != "" {
		s += " (" + fn + ")"
	}
	return s
}

// shortPath keeps the last three parts of a path: enough to find the file,
// short enough for a context.
func shortPath(p string) string {
	parts := strings.Split(filepath.ToSlash(p), "/")
	if len(parts) <= 3 {
		return p
	}
	return ".../" + strings.Join(parts[len(parts)-3:], "/")
}
