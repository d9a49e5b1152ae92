package analyze

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// activationDominant: activations are the dominant part when they are at
// least half of the memory needed at the moment (allocated + the request at
// an OOM; the peak otherwise) — more than everything else together, so they
// are what has to shrink.
const activationDominant = 0.5

// activationPeak reports activations (tensors made in forward and kept for
// backward) when they are the dominant part of an OOM, or of a peak within
// nearCapacity of the device memory the caller gave. On a healthy run nothing
// is reported: activations are usually the largest category of a training
// peak, and that alone is not a problem.
func (dg *devDiag) activationPeak() []Finding {
	var out []Finding
	for i := range dg.ooms {
		od := &dg.ooms[i]
		need := od.o.Allocated + od.o.Requested
		act := catBytes(od.cats, CatActivation)
		if od.cats == nil || float64(act) < activationDominant*float64(need) {
			continue
		}
		od.act = true
		f := dg.activationFinding(od.blocks, act, need, "when it ran out")
		f.Severity = "error"
		if od.frag || od.large {
			// Dominant, yet not the OOM's cause (decided first): worth
			// knowing, not what to fix first.
			f.Severity = "warning"
		}
		f.Evidence.Numbers["requested"] = od.o.Requested
		f.Evidence.Numbers["allocated"] = od.o.Allocated
		f.Evidence.EndUS = od.o.TimeUS
		out = append(out, f)
	}
	capBytes, src := dg.capacity()
	peak := dg.d.Peak.Bytes
	if len(dg.ooms) > 0 || src != "given" || float64(peak) < nearCapacity*float64(capBytes) {
		return out
	}
	act := catBytes(dg.d.Categories, CatActivation)
	if float64(act) < activationDominant*float64(peak) {
		return out
	}
	f := dg.activationFinding(dg.peak, act, peak, fmt.Sprintf("at a peak that reaches %d%% of the device", pct(peak, capBytes)))
	f.Evidence.Numbers["device_memory"] = capBytes
	f.Evidence.EndUS = dg.d.Peak.TimeUS
	return append(out, f)
}

// modelLine is where model code made an activation: the innermost frame of
// a model's own code — a library outside torch (transformers), or a forward()
// of yours — else the innermost torch.nn module (linear.py, for a plain
// nn.Sequential called from your line).
func (dg *devDiag) modelLine(o int32) (file string, line int, fn string, container string) {
	p := dg.a.origins.path(o)
	nn := -1
	for i := len(p) - 1; i >= 0; i-- {
		f := p[i]
		if f.File == "" {
			continue
		}
		if strings.HasSuffix(f.File, "torch/nn/modules/container.py") {
			container = "sequential"
		}
		if strings.Contains(f.File, "/transformers/") {
			container = "transformers"
		}
		if file == "" && !isTorchFile(f.File) && (f.Func == "forward" || !profiler.IsUserFile(f.File)) {
			file, line, fn = f.File, f.Line, f.Func
		}
		if nn < 0 && strings.Contains(f.File, "torch/nn/modules/") && !strings.HasSuffix(f.File, "module.py") &&
			!strings.HasSuffix(f.File, "container.py") {
			nn = i
		}
	}
	if file == "" && nn >= 0 {
		file, line, fn = p[nn].File, p[nn].Line, p[nn].Func
	}
	return file, line, fn, container
}

// isTorchFile says whether a file is torch's own code: under a torch/
// directory with no packages directory below it (so a virtualenv in
// /opt/torch/.venv/.../site-packages/transformers is not torch).
func isTorchFile(file string) bool {
	i := strings.LastIndex(file, "/torch/")
	return i >= 0 && !strings.Contains(file[i:], "-packages/")
}

func (dg *devDiag) activationFinding(blocks []catBlock, act, total int64, when string) Finding {
	models, users := lineTotals{}, lineTotals{}
	kinds := map[string]bool{}
	first := int64(0)
	for _, b := range blocks {
		if b.cat != CatActivation {
			continue
		}
		if first == 0 || b.t < first {
			first = b.t
		}
		o := b.resolved()
		mf, ml, mfn, container := dg.modelLine(o)
		kinds[container] = true
		uf, ul, ufn := dg.place(o)
		direct := mf == ""
		if direct { // made by your line itself (an input), not inside a model
			mf, ml, mfn = uf, ul, ufn
		}
		if x := models.add(mf, ml, mfn, b.size); direct {
			x.direct = true
		}
		users.add(uf, ul, ufn, b.size)
	}
	f := Finding{Kind: KindActivationPeak, Severity: "warning",
		Evidence: Evidence{Numbers: map[string]int64{"activation_bytes": act, "total": total, "share_pct": pct(act, total)},
			StartUS: first}}
	var names []string
	for _, x := range models.top(5) {
		what := "model code"
		if x.direct {
			what = "made directly by"
		}
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: x.file, Line: x.line, Bytes: x.bytes,
			Note: fmt.Sprintf("%s (%s): %d activations", what, x.fn, x.n)})
		names = append(names, dg.short(x.file, x.line))
	}
	for i, x := range users.top(3) {
		if i == 0 {
			f.File, f.Line = x.file, x.line
		}
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: x.file, Line: x.line, Bytes: x.bytes,
			Note: fmt.Sprintf("your line (%s)", x.fn)})
	}
	f.Title = fmt.Sprintf("Activations saved for backward hold %s, %d%% of the memory in use %s", fb(act), pct(act, total), when)
	how := "wrap the repeated blocks of the model in torch.utils.checkpoint.checkpoint"
	switch {
	case kinds["transformers"]:
		how = "call model.gradient_checkpointing_enable() (transformers) so each layer's activations are recomputed in backward"
	case kinds["sequential"]:
		how = "use torch.utils.checkpoint.checkpoint_sequential(model, segments, x) on the nn.Sequential"
	}
	where := "most are made at " + strings.Join(names, ", ")
	if len(names) == 0 { // no stacks (an OOM between recorded windows): the agent's names say where
		where = "most are saved in " + dg.activationModules(3)
	}
	f.Fix = fmt.Sprintf("recompute activations instead of keeping them: %s (%s); "+
		"or lower the batch size or sequence length, which activations grow with linearly", how, where)
	return f
}

// activationModules lists the modules whose forward saved the most
// activations, by the agent's names ("model.transformer.h.*.mlp.c_fc").
func (dg *devDiag) activationModules(n int) string {
	by := map[string]int64{}
	if t := dg.r.Tensors; t != nil {
		for _, g := range t.Groups {
			if g.Kind == "activation" && g.Module != "" {
				by[g.Module] += g.Bytes
			}
		}
	}
	var mods []string
	for m := range by {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool {
		return by[mods[i]] > by[mods[j]] || by[mods[i]] == by[mods[j]] && mods[i] < mods[j]
	})
	if len(mods) > n {
		mods = mods[:n]
	}
	if len(mods) == 0 {
		return "the model's forward"
	}
	return strings.Join(mods, ", ")
}
