package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// generateWhatIf is `whatif --generate`'s answer.
type generateWhatIf struct {
	Model       *analyze.GenerateModel `json:"model"`
	Predictions []generatePrediction   `json:"predictions"`
	Limit       int64                  `json:"limit,omitempty"` // device memory less the overhead
}

type generatePrediction struct {
	Size         analyze.GenerateSize `json:"size"`
	Peak         int64                `json:"peak_allocated"`
	Fits         *bool                `json:"fits,omitempty"`
	LargestBatch int64                `json:"largest_batch,omitempty"` // at this size's lengths, within Limit
}

// runGenerate predicts generation sizes from one recorded generate() run.
func (c *whatifCmd) runGenerate(pos []string, stdout, stderr io.Writer) int {
	if len(pos) != 1 || c.recorded == "" {
		fmt.Fprintln(stderr, "vramscope whatif --generate: want one snapshot of a generate() run and its size with --recorded BxP+N")
		return exitInput
	}
	rec, err := analyze.ParseGenerateSize(c.recorded)
	if err != nil {
		fmt.Fprintf(stderr, "vramscope whatif: --recorded: %v\n", err)
		return exitInput
	}
	var sizes []analyze.GenerateSize
	for _, f := range strings.Split(c.generate, ",") {
		s, err := analyze.ParseGenerateSize(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(stderr, "vramscope whatif: --generate: %v\n", err)
			return exitInput
		}
		sizes = append(sizes, s)
	}
	res, err := c.load(pos[0], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	m, err := analyze.GenerateModelOf(res, rec)
	if err != nil {
		return fail(stderr, inputError{fmt.Errorf("%s: %w", pos[0], err)})
	}
	out := generateWhatIf{Model: m}
	if c.device > 0 {
		if out.Limit = int64(c.device) - int64(c.overhead); out.Limit <= 0 {
			fmt.Fprintln(stderr, "vramscope whatif: --device-memory leaves nothing beyond --overhead")
			return exitInput
		}
	}
	for _, s := range sizes {
		p := generatePrediction{Size: s, Peak: m.PeakAt(s)}
		if out.Limit > 0 {
			fits := p.Peak <= out.Limit
			p.Fits, p.LargestBatch = &fits, m.LargestBatch(s, out.Limit)
		}
		out.Predictions = append(out.Predictions, p)
	}
	if c.json {
		return printJSON(stdout, stderr, out)
	}
	writeGenerate(stdout, out)
	return exitOK
}

func writeGenerate(w io.Writer, r generateWhatIf) {
	m := r.Model
	fmt.Fprintf(w, "what-if (generation) from %s: peak %s allocated\n", m.Recorded, fb(m.Peak))
	fmt.Fprintf(w, "  weights %s; KV cache %s a token of a sequence (growth copy included)", fb(m.Weights), fb(m.CacheToken))
	if m.NamedToken > 0 {
		fmt.Fprintf(w, ", %s by the cache's shapes", fb(m.NamedToken))
	}
	fmt.Fprintf(w, "; %s a sequence besides its cache", fb(m.PerSeq))
	if m.PromptToken > 0 {
		fmt.Fprintf(w, "; the prompt's forward %s a token", fb(m.PromptToken))
	}
	fmt.Fprintln(w)
	if r.Limit > 0 {
		fmt.Fprintf(w, "  memory for the allocator: %s\n", fb(r.Limit))
	}
	fmt.Fprintln(w)
	for _, p := range r.Predictions {
		fmt.Fprintf(w, "  %-14s %11s", p.Size, fb(p.Peak))
		if p.Fits != nil {
			fmt.Fprintf(w, "  %s; largest batch at these lengths: %d",
				map[bool]string{true: "fits", false: "does not fit"}[*p.Fits], p.LargestBatch)
		}
		fmt.Fprintln(w)
	}
}
