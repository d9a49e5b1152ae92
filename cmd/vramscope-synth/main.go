// Command vramscope-synth makes a large CUDA memory snapshot from a real one by
// repeating its steps (see internal/synth):
//
//	vramscope-synth -o OUT.pickle --entries N SOURCE.pickle
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/vramscope/vramscope/internal/synth"
)

func main() {
	out := flag.String("o", "", "output snapshot (pickle)")
	entries := flag.Int64("entries", 0, "device-0 trace entries to write")
	quiet := flag.Bool("q", false, "no progress on stderr")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: vramscope-synth -o OUT.pickle --entries N SOURCE.pickle")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || *entries < 0 || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	opt := synth.Options{Entries: *entries}
	if !*quiet {
		opt.Progress = func(done, total int64) { fmt.Fprintf(os.Stderr, "\r%d / %d entries", done, total) }
	}
	start := time.Now()
	res, err := synth.GenerateFile(*out, flag.Arg(0), opt)
	if !*quiet {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vramscope-synth:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%s: %d entries (%d repetitions of %d, the first from entry %d), %d bytes in %.1fs\n",
		*out, res.Entries, res.Reps, res.PerRep, res.Skipped, res.Bytes, time.Since(start).Seconds())
}
