package cli

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/marshal"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

type convertCmd struct{ out string }

// runConvert writes a VSM1 snapshot (what the agent streams to the daemon) as
// the pickle PyTorch writes, for tools that read only those (pytorch.org/memory_viz).
func runConvert(args []string, stdout, stderr io.Writer) int {
	var c convertCmd
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.StringVar(&c.out, "o", "", "the pickle to write (default: FILE with .pickle for its extension)")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope convert: want one VSM1 snapshot file")
		return exitInput
	}
	in := pos[0]
	out := c.out
	if out == "" {
		out = in[:len(in)-len(filepath.Ext(in))] + ".pickle"
		if out == in {
			out = in + ".pickle"
		}
	}
	if err := checkVSM(in); err != nil {
		return fail(stderr, inputError{err})
	}
	f, _, err := torchsnap.OpenFile(in)
	if err != nil {
		return fail(stderr, inputError{err})
	}
	defer f.Close()
	tmp := out + ".tmp"
	w, err := os.Create(tmp)
	if err != nil {
		return fail(stderr, err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	err = marshal.Transcode(bufio.NewReaderSize(f, 1<<20), bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fail(stderr, inputError{fmt.Errorf("%s: %w", in, err)})
	}
	// What convert writes, vramscope reads: a stream that decodes but makes
	// a pickle that does not is a bug here, not in the input.
	if _, err := torchsnap.ReadFile(tmp, profiler.NewFrames(), nil, torchsnap.Options{}); err != nil {
		os.Remove(tmp)
		return fail(stderr, fmt.Errorf("converting %s: the pickle written does not read back: %w", in, err))
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return fail(stderr, err)
	}
	fmt.Fprintln(stdout, out)
	return exitOK
}

// checkVSM checks that in is a VSM1 stream and reads it as analyze does, so
// that convert refuses what analyze refuses (bytes after the end frame too).
func checkVSM(in string) error {
	f, _, err := torchsnap.OpenFile(in)
	if err != nil {
		return err
	}
	head := make([]byte, len(marshal.Magic))
	n, _ := io.ReadFull(f, head)
	f.Close()
	if !marshal.IsVSM(head[:n]) {
		return fmt.Errorf("%s: not a VSM1 stream: it starts with %q, not %q", in, head[:n], marshal.Magic)
	}
	_, err = torchsnap.ReadFile(in, profiler.NewFrames(), nil, torchsnap.Options{})
	return err
}
