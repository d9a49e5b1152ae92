package cli

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/profiler/analyze"
)

type whatifCmd struct {
	source
	json     bool
	sizes    string
	predict  string
	model    string
	device   byteSize
	overhead byteSize
	generate string // whatif_generate.go
	recorded string
}

func runWhatIf(args []string, stdout, stderr io.Writer) int {
	c := whatifCmd{overhead: 1 << 30}
	fs := flag.NewFlagSet("whatif", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.json, "json", false, "print the fit as JSON")
	fs.StringVar(&c.sizes, "sizes", "", "N,N,...: the batch size (or sequence length) of each snapshot, in order; "+
		"default: the last number in each file name (train_bs8.pickle -> 8)")
	fs.StringVar(&c.predict, "predict", "", "N,N,...: sizes to predict the peak of")
	fs.StringVar(&c.model, "model", "auto", "auto, linear or quadratic (auto picks quadratic only with 4+ sizes that show it)")
	fs.Var(&c.device, "device-memory", "SIZE: the GPU's memory (e.g. 80GiB); needed for the largest size that fits")
	fs.Var(&c.overhead, "overhead", "SIZE: device memory outside PyTorch's allocator (CUDA context, cuBLAS, NCCL); "+
		"default 1GiB (0.74 GiB measured beside a GPT-2 run on an H200, torch 2.11)")
	fs.StringVar(&c.generate, "generate", "", "BxP+N,...: generation sizes (batch x prompt + new tokens) to predict "+
		"from one recorded generate() run (give its size with --recorded)")
	fs.StringVar(&c.recorded, "recorded", "", "BxP+N: the size of the recorded generation (with --generate)")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if c.generate != "" {
		return c.runGenerate(pos, stdout, stderr)
	}
	if len(pos) < 2 {
		fmt.Fprintln(stderr, "vramscope whatif: want snapshot files of the same script at two or more sizes")
		return exitInput
	}
	sizes, err := c.sizesOf(pos)
	if err != nil {
		fmt.Fprintf(stderr, "vramscope whatif: %v\n", err)
		return exitInput
	}
	predict, err := numbers(c.predict)
	if err != nil {
		fmt.Fprintf(stderr, "vramscope whatif: --predict: %v\n", err)
		return exitInput
	}
	var pts []analyze.WhatIfPoint
	for i, p := range pos {
		res, err := c.load(p, stderr)
		if err != nil {
			return fail(stderr, err)
		}
		pts = append(pts, analyze.WhatIfPointOf(res, sizes[i]))
	}
	w, err := analyze.FitWhatIf(pts, analyze.WhatIfOptions{Model: c.model, DeviceMemory: int64(c.device),
		Overhead: int64(c.overhead), Predict: predict})
	if err != nil {
		return fail(stderr, inputError{err})
	}
	if c.json {
		return printJSON(stdout, stderr, w)
	}
	writeWhatIf(stdout, w, c.sizes == "")
	return exitOK
}

var lastNumber = regexp.MustCompile(`(\d+(?:\.\d+)?)\D*$`)

// sizesOf reads --sizes, or the last number of each file's base name.
func (c *whatifCmd) sizesOf(files []string) ([]float64, error) {
	if c.sizes != "" {
		s, err := numbers(c.sizes)
		if err != nil {
			return nil, fmt.Errorf("--sizes: %v", err)
		}
		if len(s) != len(files) {
			return nil, fmt.Errorf("--sizes gives %d sizes for %d files", len(s), len(files))
		}
		return s, nil
	}
	var out []float64
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		m := lastNumber.FindStringSubmatch(base)
		if m == nil {
			return nil, fmt.Errorf("%s: no number in the file name; give the sizes with --sizes, e.g. --sizes 4,8,16", f)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		out = append(out, v)
	}
	return out, nil
}

func numbers(s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func writeWhatIf(w io.Writer, r *analyze.WhatIf, fromNames bool) {
	how := ""
	if fromNames {
		how = " (sizes read from the file names)"
	}
	fmt.Fprintf(w, "what-if: peak memory against size, %d snapshots%s\n\n", len(r.Points), how)
	fmt.Fprintf(w, "  %8s %11s %11s  %s\n", "size", "allocated", "reserved", "file")
	for _, p := range r.Points {
		fmt.Fprintf(w, "  %8s %11s %11s  %s\n", sizeText(p.Size), fb(p.Allocated), fb(p.Reserved), p.File)
	}
	fmt.Fprintf(w, "\n%s fit:\n", r.Model)
	fmt.Fprintf(w, "  allocated ≈ %s   %s\n", formula(r.Allocated), looText(r.Allocated))
	fmt.Fprintf(w, "  reserved  ≈ %s   %s\n", formula(r.Reserved), looText(r.Reserved))
	if len(r.Categories) > 0 {
		var grow, fixed []string
		for _, c := range r.Categories {
			if c.PerUnit > 1<<20 {
				grow = append(grow, fmt.Sprintf("%s +%s", c.Name, fb(int64(c.PerUnit))))
			} else if c.Fixed > 1<<20 {
				fixed = append(fixed, fmt.Sprintf("%s %s", c.Name, fb(int64(c.Fixed))))
			}
		}
		if len(grow) > 0 {
			fmt.Fprintf(w, "  per unit of size: %s\n", strings.Join(grow, ", "))
		}
		if len(fixed) > 0 {
			fmt.Fprintf(w, "  fixed: %s\n", strings.Join(fixed, ", "))
		}
	}
	if r.DeviceMemory > 0 {
		fmt.Fprintf(w, "\ndevice %s, %s outside the allocator: ", fb(r.DeviceMemory), fb(r.Overhead))
		switch {
		case r.MaxSize < 0:
			fmt.Fprintln(w, "the peak does not grow with the size")
		case r.MaxSize == 0:
			fmt.Fprintln(w, "not even size 1 fits")
		default:
			fmt.Fprintf(w, "largest size that fits: %d", r.MaxSize)
			if r.MaxSizeFit != r.MaxSize {
				fmt.Fprintf(w, " (%d by the fitted line alone, with no margin for its error)", r.MaxSizeFit)
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.Predictions) > 0 {
		fmt.Fprintln(w)
		for _, p := range r.Predictions {
			fits := ""
			if p.Fits != nil {
				fits = map[bool]string{true: " — fits", false: " — does not fit"}[*p.Fits]
			}
			fmt.Fprintf(w, "  at %s: %s allocated, %s reserved%s\n", sizeText(p.Size), fb(p.Allocated), fb(p.Reserved), fits)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
}

func sizeText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func formula(f analyze.Fit) string {
	s := fb(int64(f.Coef[0]))
	if len(f.Coef) > 1 {
		s += " + " + fb(int64(f.Coef[1])) + " × size"
	}
	if len(f.Coef) > 2 {
		s += fmt.Sprintf(" + %s × size²", fb(int64(f.Coef[2])))
	}
	return s
}

func looText(f analyze.Fit) string {
	if f.LOOError < 0 {
		return "(error unknown: record a third size)"
	}
	return fmt.Sprintf("(leave-one-out error: largest %.1f%%, mean %.1f%%)", 100*f.LOOError, 100*f.LOOMean)
}
