package cli

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

type analyzeCmd struct {
	source
	json bool
	html string
	top  int
}

func runAnalyze(args []string, stdout, stderr io.Writer) int {
	var c analyzeCmd
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.json, "json", false, "print the full result as JSON")
	fs.StringVar(&c.html, "html", "", "also write the flame graph (peak) as a self-contained HTML page")
	fs.IntVar(&c.top, "top", 10, "lines and stacks to list")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope analyze: want exactly one snapshot file")
		return exitInput
	}
	res, err := c.load(pos[0], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	if c.html != "" {
		if err := writeHTML(c.html, res.Flame(analyze.FlameOptions{Weight: flame.WeightPeak})); err != nil {
			return fail(stderr, err)
		}
	}
	if c.json {
		return printJSON(stdout, stderr, res)
	}
	writeSummary(stdout, res, c.top)
	if c.html != "" {
		fmt.Fprintf(stdout, "\nflame graph: %s\n", c.html)
	}
	return exitOK
}

func writeHTML(path string, t *flame.Tree) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := flame.WriteHTML(f, t); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
