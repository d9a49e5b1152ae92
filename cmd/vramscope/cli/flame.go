package cli

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
	"github.com/vramscope/vramscope/profiler/pprofenc"
)

type flameCmd struct {
	source
	out, weight, format string
	keepWrappers        bool
}

func runFlame(args []string, stdout, stderr io.Writer) int {
	var c flameCmd
	fs := flag.NewFlagSet("flame", flag.ContinueOnError)
	c.register(fs)
	fs.StringVar(&c.out, "o", "", "output file (default, or -: standard output; HTML and pprof are not written to a terminal unless -o -)")
	fs.StringVar(&c.weight, "weight", "peak", "peak (live at the peak), alloc (all allocated) or current (alive at snapshot)")
	fs.StringVar(&c.format, "format", "html", "html, json, collapsed or pprof")
	fs.BoolVar(&c.keepWrappers, "keep-wrappers", false, "keep nn.Module call wrappers and decorator frames")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	w, wok := flame.ParseWeight(c.weight)
	if len(pos) != 1 || !wok {
		fmt.Fprintln(stderr, "vramscope flame: want one snapshot file and --weight peak|alloc|current")
		return exitInput
	}
	switch c.format {
	case "html", "json", "collapsed", "pprof":
	default: // checked before anything is read or any output file is touched
		fmt.Fprintf(stderr, "vramscope flame: unknown --format %q (html, json, collapsed or pprof)\n", c.format)
		return exitInput
	}
	if f, ok := stdout.(*os.File); ok && c.out == "" && (c.format == "html" || c.format == "pprof") && isTerminal(f) {
		fmt.Fprintf(stderr, "vramscope flame: not writing %s to a terminal: give -o FILE (-o flame.%s), pipe it, or -o - to write it here anyway\n",
			map[string]string{"html": "an HTML page", "pprof": "a gzipped pprof profile"}[c.format],
			map[string]string{"html": "html", "pprof": "pb.gz"}[c.format])
		return exitInput
	}
	res, err := c.load(pos[0], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	out := stdout
	var f *os.File
	if c.out != "" && c.out != "-" {
		if f, err = os.Create(c.out); err != nil {
			return fail(stderr, err)
		}
		out = f
	}
	bw := bufio.NewWriter(out)
	err = c.write(bw, res, w)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

func (c *flameCmd) write(w io.Writer, res *analyze.Result, weight flame.Weight) error {
	opt := analyze.FlameOptions{Weight: weight, KeepWrappers: c.keepWrappers}
	switch c.format {
	case "html":
		return flame.WriteHTML(w, res.Flame(opt))
	case "json":
		return json.NewEncoder(w).Encode(res.Flame(opt))
	case "collapsed":
		return flame.WriteCollapsed(w, res.Flame(opt))
	case "pprof":
		return pprofenc.Write(w, res)
	}
	return inputError{fmt.Errorf("unknown --format %q (html, json, collapsed or pprof)", c.format)}
}
