package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

type analyzeCmd struct {
	source
	json   bool
	report bool
	bundle string
	html   string
	top    int
	device byteSize
}

func runAnalyze(args []string, stdout, stderr io.Writer) int {
	var c analyzeCmd
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.json, "json", false, "print the full result as JSON")
	fs.StringVar(&c.html, "html", "", "also write the report (timeline, flame graph at the peak, top lines, findings) as a self-contained HTML page")
	fs.BoolVar(&c.report, "report", false, "print the data of the HTML report as JSON (timeline, moments, top lines, findings; what the notebook and VS Code draw)")
	fs.StringVar(&c.bundle, "bundle", "", "WEIGHT: print the result (--json), the flame tree of WEIGHT (peak, alloc or current; flame --format json) "+
		"and the report's data (--report) as one JSON object {result, tree, report}: one read of the snapshot for a front end that draws all three (the notebook)")
	fs.IntVar(&c.top, "top", 10, "lines and stacks to list")
	fs.Var(&c.device, "device-memory", "SIZE: the GPU's memory or the process's cap (e.g. 80GiB); a snapshot does not record it. "+
		"Findings then say when a leak fills the device and judge peaks near capacity")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope analyze: want exactly one snapshot file")
		return exitInput
	}
	weight, wok := flame.ParseWeight(c.bundle)
	if c.bundle != "" && !wok {
		fmt.Fprintf(stderr, "vramscope analyze: unknown --bundle weight %q (peak, alloc or current)\n", c.bundle)
		return exitInput
	}
	res, err := c.run(pos[0], stderr, int64(c.device)) // source.load with the device's memory, which only analyze takes
	if err != nil {
		return fail(stderr, err)
	}
	if c.html != "" {
		if err := writeReport(c.html, res); err != nil {
			return fail(stderr, err)
		}
	}
	if c.bundle != "" {
		return printBundle(stdout, stderr, res, weight)
	}
	if c.report {
		b, err := res.Report()
		if err != nil {
			return fail(stderr, err)
		}
		stdout.Write(append(b, '\n'))
		return exitOK
	}
	if c.json {
		return printJSON(stdout, stderr, res)
	}
	out := terminal(stdout)
	writeSummary(out, res, c.top)
	writeDiagnosis(out, res)
	if c.html != "" {
		fmt.Fprintf(out, "\nreport: %s\n", c.html)
	}
	return exitOK
}

// printBundle prints {result, tree, report} in one JSON object: what
// analyze --json, flame --format json --weight W and analyze --report print,
// from one analysis.
func printBundle(stdout, stderr io.Writer, res *analyze.Result, w flame.Weight) int {
	report, err := res.Report()
	if err != nil {
		return fail(stderr, err)
	}
	return printJSON(stdout, stderr, struct {
		Result *analyze.Result `json:"result"`
		Tree   *flame.Tree     `json:"tree"`
		Report json.RawMessage `json:"report"`
	}{res, res.Flame(analyze.FlameOptions{Weight: w}), report})
}

// writeDiagnosis prints the steps, the memory at the peak by category, and
// the evidence behind each finding (the summary lists their titles and fixes).
func writeDiagnosis(w io.Writer, r *analyze.Result) {
	writeUncovered(w, r)
	if len(r.Steps) > 0 {
		fmt.Fprintf(w, "\nSteps (%d, from %s%s); allocated at each step's end:\n ", len(r.Steps), r.StepSource, stepsBefore(r.StepsBeforeTrace, "; "))
		for i, s := range r.Steps {
			if i == 12 && len(r.Steps) > 13 {
				fmt.Fprintf(w, " ... %s", profiler.FormatBytes(r.Steps[len(r.Steps)-1].LiveBytesAtEnd))
				break
			}
			fmt.Fprintf(w, " %s", profiler.FormatBytes(s.LiveBytesAtEnd))
		}
		fmt.Fprintln(w)
	}
	var cats []string
	for _, c := range r.Categories {
		if c.Bytes > 0 {
			cats = append(cats, fmt.Sprintf("%s %s (%.0f%%)", c.Name, profiler.FormatBytes(c.Bytes), 100*c.Share))
		}
	}
	if len(cats) > 0 {
		fmt.Fprintf(w, "\nMemory at the peak by category: %s\n", strings.Join(cats, ", "))
		if r.Tensors == nil && catBytes(r.Categories, analyze.CatUnknown) > 0 {
			fmt.Fprintln(w, "  unknown: blocks made before recording began, with no frames, while no live block shows the optimizer making its "+
				"state: parameters and optimizer state; record from the start, or attach the agent, which names tensors")
		}
	}
	if len(r.Findings) == 0 {
		return
	}
	fmt.Fprintf(w, "\nEvidence:\n")
	for _, f := range r.Findings {
		fmt.Fprintf(w, "  %s:", f.Kind)
		keys := make([]string, 0, len(f.Evidence.Numbers))
		for k := range f.Evidence.Numbers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := f.Evidence.Numbers[k]
			if u, _ := analyze.EvidenceUnitOf(k); u == analyze.UnitBytes {
				fmt.Fprintf(w, " %s=%s", k, profiler.FormatBytes(v))
			} else {
				fmt.Fprintf(w, " %s=%d", k, v)
			}
		}
		fmt.Fprintln(w)
		for _, l := range f.Evidence.Lines {
			where := "-"
			if l.File != "" {
				where = fmt.Sprintf("%s:%d", filepath.Base(l.File), l.Line)
			}
			fmt.Fprintf(w, "      %10s  %s  %s\n", profiler.FormatBytes(l.Bytes), where, l.Note)
		}
	}
}

func catBytes(cats []analyze.Category, name string) int64 {
	for _, c := range cats {
		if c.Name == name {
			return c.Bytes
		}
	}
	return 0
}

// stepsBefore says how many annotated steps ended before the trace began.
func stepsBefore(n int, sep string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%s%d more ended before the trace's first event, not counted: their memory was not recorded", sep, n)
}

// writeUncovered says what of the trace the analysis could not cover: steps
// annotated before it began, and the end of a trace longer than the level
// log indexes (2^31 allocations and frees).
func writeUncovered(w io.Writer, r *analyze.Result) {
	if len(r.Steps) == 0 && r.StepsBeforeTrace > 0 {
		fmt.Fprintf(w, "\nSteps: none inside the trace (%s)\n", stepsBefore(r.StepsBeforeTrace, ""))
	}
	for _, d := range r.Devices {
		if d.StepsIncomplete {
			fmt.Fprintf(w, "\nDevice %d: the trace has more allocations and frees than the engine indexes (2^31); "+
				"steps and the timeline's categories stop there\n", d.Device)
		}
	}
}

// byteSize is a flag of bytes: 85899345920, 80GiB, 80G (binary), 80GB (decimal).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
		{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult, unit := 1.0, false
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult, unit = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult, true
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want a size such as 80GiB, got %q", s)
	}
	// A bare number is bytes; one under 1 MiB is almost surely a size in
	// GiB or MiB without its unit (--device-memory 80 was 80 bytes).
	if !unit && v > 0 && v < 1<<20 {
		return fmt.Errorf("%q has no unit and would be %s bytes: did you mean %sGiB or %sMiB? (a bare number is bytes; write 80GiB, 512MiB or 85899345920)", s, t, t, t)
	}
	*b = byteSize(v * mult)
	return nil
}

// writeReport writes the linked report page: the timeline, the flame graph
// at the peak, the top lines, categories and findings.
func writeReport(path string, res *analyze.Result) error {
	rep, err := res.Report()
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := flame.WriteReport(f, res.Flame(analyze.FlameOptions{Weight: flame.WeightPeak}), rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
