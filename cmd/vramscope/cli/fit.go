package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// fitCmd is `vramscope fit`: from one recorded step, the peak at another
// batch size or sequence length, and the plans that fit a memory budget.
type fitCmd struct {
	source
	json     bool
	budget   byteSize
	batch    int64
	seq      int64
	recorded string
}

func runFit(args []string, stdout, stderr io.Writer) int {
	c := fitCmd{}
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&c.json, "json", false, "print the answer as JSON")
	fs.Var(&c.budget, "budget", "SIZE: the memory the step may use (the GPU's, less CUDA's own, or a per-process cap), e.g. 40GiB")
	fs.Int64Var(&c.batch, "batch", 0, "N: the batch size to plan for (default: the recorded one)")
	fs.Int64Var(&c.seq, "seq", 0, "L: the sequence length to plan for (default: the recorded one)")
	fs.StringVar(&c.recorded, "recorded", "", "BxL: the batch and sequence length the snapshot ran at "+
		"(default: read from the agent's tensor shapes)")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 1 || c.budget <= 0 {
		fmt.Fprintln(stderr, "vramscope fit: want one snapshot of a training step and --budget SIZE")
		return exitInput
	}
	var rec analyze.FitSize
	if c.recorded != "" {
		var err error
		if rec, err = analyze.ParseFitSize(c.recorded); err != nil {
			fmt.Fprintf(stderr, "vramscope fit: --recorded: %v\n", err)
			return exitInput
		}
	}
	if c.batch < 0 || c.seq < 0 {
		fmt.Fprintln(stderr, "vramscope fit: --batch and --seq must be positive")
		return exitInput
	}
	c.keepTrace = true
	res, err := c.load(pos[0], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	m, err := res.FitModel(rec)
	if err != nil {
		fmt.Fprintf(stderr, "vramscope fit: %v\n", err)
		return exitInput
	}
	target := m.Recorded
	if c.batch > 0 {
		target.Batch = c.batch
	}
	if c.seq > 0 {
		target.Seq = c.seq
	}
	a := m.PlanFor(target, int64(c.budget))
	if c.json {
		return printJSON(stdout, stderr, a)
	}
	writeFit(stdout, a)
	return exitOK
}

func writeFit(w io.Writer, a *analyze.FitAnswer) {
	m := a.Model
	fmt.Fprintf(w, "fit: %s, recorded at batch %d × seq %d (%s)\n", m.File, m.Recorded.Batch, m.Recorded.Seq, m.RecordedSource)
	fmt.Fprintf(w, "  at the recorded peak: fixed %s (weights, their casts), gradients %s, optimizer state %s; %s a token; largest transient %s\n",
		fb(m.Fixed), fb(m.Gradients), fb(m.State), fb(m.PerToken), fb(m.LargestTransient))
	rest := ""
	if m.EndsInOOM {
		rest = ", with the rest of the failed step estimated"
	}
	fmt.Fprintf(w, "  replayed at the recorded size: %s allocated, %s reserved (the trace: %s allocated%s)\n\n",
		fb(m.AtRecorded.Allocated), fb(m.AtRecorded.Reserved), fb(m.RecordedPeak), rest)
	p := a.AsIs
	fmt.Fprintf(w, "at batch %d × seq %d: %s allocated, %s reserved (fragmentation margin %s; largest transient %s; peak: %s)\n",
		a.Target.Batch, a.Target.Seq, fb(p.Allocated), fb(p.Reserved), fb(p.Margin), fb(p.Transient), p.Phase)
	verdict := "does not fit"
	if a.Fits {
		verdict = "fits"
	}
	fmt.Fprintf(w, "budget %s (%.0f%% kept for the prediction's error): %s\n", fb(a.Budget), 100*a.SafetyMargin, verdict)
	if len(a.Plans) > 0 && !a.Fits {
		fmt.Fprintln(w, "\nplans that fit:")
	}
	for _, pl := range a.Plans {
		if pl.Kind == analyze.PlanAsIs {
			continue
		}
		writePlan(w, pl)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	if len(a.Notes) > 0 {
		fmt.Fprintln(w)
	}
}

func writePlan(w io.Writer, pl analyze.FitPlan) {
	fmt.Fprintf(w, "  %s: %s allocated, %s reserved\n", pl.Title, fb(pl.Predicted.Allocated), fb(pl.Predicted.Reserved))
	if len(pl.Checkpointed) > 0 {
		var each []string
		for _, b := range pl.Checkpointed {
			each = append(each, fmt.Sprintf("%s %s", b.Short, fb(b.Saved-b.Kept)))
		}
		fmt.Fprintf(w, "      gives back (at the recorded size): %s\n", strings.Join(each, ", "))
	}
	fmt.Fprintf(w, "      cost: %s\n", pl.Cost)
	if pl.Setting != "" {
		fmt.Fprintf(w, "      set: %s\n", pl.Setting)
	}
	if pl.Foreign != "" {
		fmt.Fprintf(w, "      needs: %s\n", pl.Foreign)
	}
}
