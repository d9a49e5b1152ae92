package cli

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

type diffCmd struct {
	source
	json   bool
	report bool
	html   string
	top    int
}

func runDiff(args []string, stdout, stderr io.Writer) int {
	var c diffCmd
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.json, "json", false, "print the diff as JSON")
	fs.StringVar(&c.html, "html", "", "also write the report of the after snapshot, both timelines overlaid and the per-line diff, as a self-contained HTML page")
	fs.BoolVar(&c.report, "report", false, "print the data of the HTML page as JSON (what the notebook draws)")
	fs.IntVar(&c.top, "top", 15, "sites to list")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "vramscope diff: want two snapshot files, before and after")
		return exitInput
	}
	a, err := c.load(pos[0], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	b, err := c.load(pos[1], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	if c.html != "" || c.report {
		if code := c.writeReport(a, b, stdout, stderr); code != exitOK || c.report {
			return code
		}
	}
	d := analyze.Compare(a, b)
	if c.json {
		return printJSON(stdout, stderr, d)
	}
	stdout = terminal(stdout) // the sites' names come from the snapshots
	fmt.Fprintf(stdout, "peak %s -> %s (%s)\n", fb(d.PeakA), fb(d.PeakB), signed(d.PeakDelta))
	writeDiffOOM(stdout, "before", d.OOMBefore)
	writeDiffOOM(stdout, "after", d.OOMAfter)
	fmt.Fprintf(stdout, "%d new sites, %d gone\n\n", d.New, d.Gone)
	fmt.Fprintf(stdout, "  %11s %11s %11s  %-26s %s\n", "peak Δ", "before", "after", "changed", "line")
	for i, s := range d.Sites {
		if i >= c.top {
			break
		}
		where := s.Function
		if s.File != "" {
			where = fmt.Sprintf("%s:%d (%s)", s.File, s.Line, s.Function)
		}
		fmt.Fprintf(stdout, "  %11s %11s %11s  %-26s %s\n", signed(s.PeakDelta), fb(s.PeakBefore), fb(s.PeakAfter), s.Label(), where)
	}
	if c.html != "" {
		fmt.Fprintf(stdout, "\nreport: %s\n", c.html)
	}
	return exitOK
}

// writeReport writes the diff page (--html) or prints its data (--report).
func (c *diffCmd) writeReport(a, b *analyze.Result, stdout, stderr io.Writer) int {
	rep, err := analyze.DiffReport(a, b)
	if err != nil {
		return fail(stderr, err)
	}
	if c.report {
		stdout.Write(append(rep, '\n'))
		return exitOK
	}
	f, err := os.Create(c.html)
	if err != nil {
		return fail(stderr, err)
	}
	err = flame.WriteReport(f, b.Flame(analyze.FlameOptions{Weight: flame.WeightPeak}), rep)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// writeDiffOOM says that one side ran out of memory, and what it needed: the
// peak of a failed run misses the request that failed.
func writeDiffOOM(w io.Writer, side string, o *analyze.OOM) {
	if o == nil {
		return
	}
	cap := ""
	if c := o.CapText(); c != "" {
		cap = ", under " + c
	}
	fmt.Fprintf(w, "%s ran out of memory: asked for %s with %s allocated (it needed at least %s)%s, at %s\n",
		side, fb(o.Requested), fb(o.Allocated), fb(o.Allocated+o.Requested), cap, where(o.File, o.Line, o.Function))
}

func signed(n int64) string {
	if n > 0 {
		return "+" + fb(n)
	}
	return fb(n)
}
