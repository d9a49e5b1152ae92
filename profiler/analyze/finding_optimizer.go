package analyze

import (
	"fmt"
)

// optimizerShare: optimizer state is reported (info) from a quarter of the
// peak. The fixes (an 8-bit optimizer keeps a quarter of AdamW's state, a
// factored one less) then save at least 18% of the peak, more than most
// single changes short of checkpointing; below that, on an ordinary AdamW run
// (11-14% of the peak in the recorded GPT-2 runs), it is not worth an editor
// diagnostic.
const optimizerShare = 0.25

// optimizerState reports the optimizer's state (blocks made by optimizer code
// that outlive its step) as a share of the peak.
func (dg *devDiag) optimizerState() *Finding {
	peak := dg.d.Peak.Bytes
	state := catBytes(dg.d.Categories, CatOptimizerState)
	if state == 0 || float64(state) < optimizerShare*float64(peak) {
		return nil
	}
	byUser, byLib := lineTotals{}, lineTotals{}
	var tensors int64
	for _, b := range dg.peak {
		if b.cat != CatOptimizerState {
			continue
		}
		tensors++
		o := b.resolved()
		file, line, fn := dg.place(o)
		byUser.add(file, line, fn, b.size)
		if in, ok := dg.innermost(o); ok {
			byLib.add(in.File, in.Line, in.Func, b.size)
		}
	}
	name := dg.optName
	if name == "" {
		name = "the optimizer"
	}
	f := Finding{Kind: KindOptimizerState, Severity: "info",
		Title: fmt.Sprintf("Optimizer state (%s) holds %s, %d%% of the peak, in %d tensors", name, fb(state), pct(state, peak), tensors),
		Evidence: Evidence{Numbers: map[string]int64{"bytes": state, "peak": peak, "share_pct": pct(state, peak), "tensors": tensors},
			EndUS: dg.d.Peak.TimeUS},
		Fix: optimizerFix(dg.optName)}
	for _, m := range []lineTotals{byUser, byLib} {
		for _, x := range m.top(3) {
			if f.File == "" && x.file != "" {
				f.File, f.Line = x.file, x.line
			}
			f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: x.file, Line: x.line, Bytes: x.bytes,
				Note: fmt.Sprintf("%s: %d state tensors", x.fn, x.n)})
		}
	}
	return &f
}

func optimizerFix(name string) string {
	s := "the optimizer's state is a large part of memory: "
	switch name {
	case "Adam", "AdamW":
		s = name + " keeps two fp32 tensors per parameter (8 bytes per parameter besides the weights and gradients): "
	}
	return s + "use an 8-bit optimizer (bitsandbytes AdamW8bit) or a factored one (Adafactor), shard the state across GPUs " +
		"(ZeRO, FSDP), or train fewer parameters (LoRA, freezing layers)"
}
