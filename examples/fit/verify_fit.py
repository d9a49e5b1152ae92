"""Check `vramscope fit` on a GPU: record one step at a small batch, let fit
predict and plan from that one snapshot, then run every prediction and every
plan and measure it. One command does it all (the device has no Go: give it
a built vramscope):

    python3 examples/fit/verify_fit.py --bin ./vramscope --out OUT

Workloads (random weights, built from configs; bf16 autocast, AdamW):
  gpt2s   GPT-2 small-shaped: 12 layers, width 768, seq 512, recorded at batch 2
  gpt2m   GPT-2 medium-shaped: 24 layers, width 1024, seq 256, recorded at batch 2
  llama   Llama-shaped: 8 layers, width 1024, GQA 16/4 heads, MLP 2816, vocab 32000, seq 512, batch 2
  oom     GPT-2 small-shaped at batch 16 x seq 512 under a 7 GiB per-process cap: runs out of
          memory in its first step; the snapshot is taken in the allocator's OOM observer with
          the tensor walk's names (as the agent does), once with its trace, once without (the
          agent's default)

Each recording is one training step under torch.cuda.memory._record_memory_history
(Python stacks); the agent's tensor walk (jupyter/vramscope/agent/_tensors.py) names what
each module saved for backward, in a second forward after recording (a walk inside the
recorded step would stretch its forward's time). Its activations' addresses are replaced
by ones no block has (they were freed), its weights' kept.

Every measured run is its own process (a fresh caching allocator): 3 optimizer steps,
torch.cuda.max_memory_allocated / max_memory_reserved over all of them; a plan runs under
a per-process cap of the budget it was planned for, so "fits" means it did not run out.
Runs go 4 at a time (per-process peaks are unaffected; step times are not comparable).
"""
import argparse
import concurrent.futures
import json
import os
import pickle
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEPS = 3

WORKLOADS = {
    "gpt2s": {"kind": "gpt2", "layers": 12, "embd": 768, "heads": 12, "seq": 512, "batch": 2},
    "gpt2m": {"kind": "gpt2", "layers": 24, "embd": 1024, "heads": 16, "seq": 256, "batch": 2},
    "llama": {"kind": "llama", "layers": 8, "embd": 1024, "heads": 16, "seq": 512, "batch": 2},
}
OOM = {"kind": "gpt2", "layers": 12, "embd": 768, "heads": 12, "seq": 512, "batch": 16, "cap_gib": 7}


# --- child side ---------------------------------------------------------------------------

def build(w):
    import torch
    torch.manual_seed(0)
    if w["kind"] == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=w["layers"], n_embd=w["embd"], n_head=w["heads"], n_positions=2048)
        model = GPT2LMHeadModel(cfg)
    else:
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(hidden_size=w["embd"], intermediate_size=2816, num_hidden_layers=w["layers"],
                          num_attention_heads=w["heads"], num_key_value_heads=4, vocab_size=32000,
                          max_position_embeddings=4096)
        model = LlamaForCausalLM(cfg)
    model.config.use_cache = False  # no KV cache in training (a checkpointed block's recompute would grow it)
    model = model.cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def forward(model, ids, scale=1.0):
    import torch
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(input_ids=ids, labels=ids).loss * scale


def walk_names(torch):
    sys.path.insert(0, os.path.join(ROOT, "jupyter"))
    from vramscope.agent import _tensors
    names = _tensors.name_tensors(torch)
    fake = 1 << 62
    kept = []
    for e in names["entries"]:
        if e[3] == "activation":
            e = list(e)
            e[1], fake = fake, fake + 4096  # freed since: an address no block has
        elif e[3] != "parameter":
            continue
        kept.append(e)
    names["entries"] = kept
    return names


def child_record(w, out):
    import torch
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=200000)
    model, opt = build(w)
    ids = torch.randint(0, model.config.vocab_size, (w["batch"], w["seq"]), device="cuda")
    forward(model, ids).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peaks = {"max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved()}
    loss = forward(model, ids)  # the walk follows this graph: what each module saves
    snap["vramscope_tensors"] = walk_names(torch)
    del loss
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return peaks


def child_oom(w, out):
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(w["cap_gib"] * 2**30 / total)
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=200000)
    sys.path.insert(0, os.path.join(ROOT, "jupyter"))
    from vramscope.agent import _capture
    taken = {}

    def observer(device, alloc, device_total, device_free):
        if taken:
            return
        snap = torch.cuda.memory._snapshot()
        _capture._name_into(snap)  # what the agent's observer does: names, and the cap
        taken.update(snap=snap, device=device, alloc=alloc, free=device_free)

    torch._C._cuda_attach_out_of_memory_observer(observer)
    model, opt = build(w)
    ids = torch.randint(0, model.config.vocab_size, (w["batch"], w["seq"]), device="cuda")
    res = {"cap": w["cap_gib"] * 2**30}
    try:
        forward(model, ids).backward()
        opt.step()
        res["oom"] = False
    except torch.OutOfMemoryError as e:
        res["oom"], res["message"] = True, str(e).splitlines()[0][:200]
    if taken:
        snap = taken["snap"]
        with open(out, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        _capture._oom_between_windows(snap, taken["device"], taken["alloc"], taken["free"])  # the agent's default: no trace
        with open(out.replace(".pickle", "_notrace.pickle"), "wb") as f:
            pickle.dump(snap, f, protocol=4)
        res["requested"] = taken["alloc"]
    return res


def resolve(model, name):
    parts = name.split(".")
    for i in range(len(parts)):
        try:
            return model.get_submodule(".".join(parts[i:]))
        except AttributeError:
            continue
    raise AttributeError("no module %s" % name)


def checkpointed(model, names):
    import torch.utils.checkpoint as ckpt
    for n in names:
        mod = resolve(model, n)
        orig = mod.forward

        def fwd(*a, _orig=orig, **k):
            return ckpt.checkpoint(_orig, *a, use_reentrant=False, **k)
        mod.forward = fwd


def adamw8bit_stand_in(torch, params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, block=256, min_8bit=4096, chunk=1 << 20):
    """What bitsandbytes' AdamW8bit keeps, for measuring the 8-bit plan where bitsandbytes is not
    installed (the device): per weight of min_8bit elements or more, both moments as uint8 with one
    fp32 scale per block of 256 (bnb's blockwise layout: 2 bytes a parameter and 8 per block),
    smaller weights in fp32; the update runs in chunks of `chunk` elements, so its temporaries stay
    small, as bnb's fused kernel's do. The quantization is linear (bnb's is a dynamic map): the
    numbers do not matter here, the bytes do."""

    def deq(q, sc, signed, a, e):
        """Elements a:e of a quantized moment, as fp32."""
        x = q[a:e].float()
        x = (x - 127.5) / 127.5 if signed else x / 255.0
        return x * sc[a // block:(e + block - 1) // block].repeat_interleave(block)[: e - a]

    class AdamW8bitStandIn(torch.optim.Optimizer):
        def __init__(self):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                b1, b2 = g["betas"]
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    st = self.state[p]
                    n = p.numel()
                    if not st:
                        if n >= min_8bit:
                            nb = (n + block - 1) // block
                            st["m"] = torch.zeros(n, dtype=torch.uint8, device=p.device)
                            st["v"] = torch.zeros(n, dtype=torch.uint8, device=p.device)
                            st["ms"] = torch.zeros(nb, dtype=torch.float32, device=p.device)
                            st["vs"] = torch.zeros(nb, dtype=torch.float32, device=p.device)
                        else:
                            st["m"], st["v"] = torch.zeros_like(p), torch.zeros_like(p)
                    if n < min_8bit:
                        st["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                        st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                        p.addcdiv_(st["m"], st["v"].sqrt().add_(eps), value=-g["lr"])
                        continue
                    flat, grad = p.view(-1), p.grad.view(-1)
                    for a in range(0, n, chunk):
                        e = min(n, a + chunk)
                        ba, be = a // block, (e + block - 1) // block
                        m = deq(st["m"], st["ms"], True, a, e).mul_(b1).add_(grad[a:e], alpha=1 - b1)
                        v = deq(st["v"], st["vs"], False, a, e).mul_(b2).addcmul_(grad[a:e], grad[a:e], value=1 - b2)
                        flat[a:e].addcdiv_(m, v.sqrt().add_(eps), value=-g["lr"])
                        for x, q, sc, signed in ((m, st["m"], st["ms"], True), (v, st["v"], st["vs"], False)):
                            pad = torch.nn.functional.pad(x, (0, (be - ba) * block - (e - a)))
                            s_ = pad.view(-1, block).abs().amax(1).clamp_(min=1e-12)
                            sc[ba:be] = s_
                            y = x / s_.repeat_interleave(block)[: e - a]
                            q[a:e] = ((y * 127.5 + 127.5) if signed else y * 255.0).round_().clamp_(0, 255).to(torch.uint8)

    return AdamW8bitStandIn()


def plan_step(torch, model, opt, run):
    """One optimizer step of the plan: its micro-batches, accumulated."""
    micro, acc = run.get("micro_batch") or run["batch"], run.get("accumulation") or 1
    for _ in range(acc):
        ids = torch.randint(0, model.config.vocab_size, (micro, run["seq"]), device="cuda")
        forward(model, ids, 1.0 / acc).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def child_measure(w, run):
    import torch
    if run.get("cap"):
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(run["cap"] / total)
    model, opt = build(w)
    if run.get("optimizer_8bit") == "bitsandbytes":
        import bitsandbytes as bnb
        opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
    elif run.get("optimizer_8bit"):
        opt = adamw8bit_stand_in(torch, model.parameters())
    checkpointed(model, run.get("checkpoint") or [])
    at_oom = attach_oom_state(torch)
    times = []
    try:
        for _ in range(STEPS):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            plan_step(torch, model, opt, run)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    except torch.OutOfMemoryError as e:
        return {"oom": True, "message": str(e).splitlines()[0][:200], "max_allocated": torch.cuda.max_memory_allocated(),
                "max_reserved": torch.cuda.max_memory_reserved(), "at_oom": at_oom}
    return {"oom": False, "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
            "step_s": sorted(times)[len(times) // 2]}


def attach_oom_state(torch):
    """The allocator's state when a request fails, read in its out-of-memory
    observer (before the step's tensors unwind): what was allocated and
    reserved, how much of it lay free in split blocks, and the largest free
    block; a dict filled at the failure."""
    state = {}

    def observer(device, requested, device_allocated, device_free):
        try:
            st = torch.cuda.memory_stats()
            segs = torch.cuda.memory_snapshot()
            free = [b["size"] for sg in segs for b in sg["blocks"] if b["state"] == "inactive"]
            state.update(requested=int(requested), allocated=st["allocated_bytes.all.current"],
                         reserved=st["reserved_bytes.all.current"], inactive_split=st["inactive_split_bytes.all.current"],
                         largest_free=max(free, default=0), free_blocks=len(free), segments=len(segs))
        except Exception as e:  # the run's result matters more than this
            state["error"] = repr(e)

    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is not None:
        attach(observer)
    return state


def child_trace(w, run, out):
    """A plan run without a cap, its second optimizer step recorded (the first makes the optimizer
    state): where the plan's peak falls, to compare with fit's replay of it."""
    import torch
    model, opt = build(w)
    checkpointed(model, run.get("checkpoint") or [])
    peaks = []
    for step in range(STEPS):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        if step == 1:
            torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=400000)
        plan_step(torch, model, opt, run)
        torch.cuda.synchronize()
        if step == 1:
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            with open(out, "wb") as f:
                pickle.dump(snap, f, protocol=4)
        peaks.append({"max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved()})
    return {"peaks": peaks}


def child_main(spec):
    job = json.loads(spec)
    w = job["workload"]
    if job["what"] == "record":
        r = child_record(w, job["out"])
    elif job["what"] == "oom":
        r = child_oom(w, job["out"])
    elif job["what"] == "trace":
        r = child_trace(w, job["run"], job["out"])
    else:
        r = child_measure(w, job["run"])
    print("RESULT " + json.dumps(r), flush=True)


# --- parent side --------------------------------------------------------------------------

def spawn(job, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    try:
        p = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], capture_output=True, text=True,
                           timeout=timeout, env=e)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (p.stderr or p.stdout)[-1500:]}


def fit(binary, snap, budget, batch=None, seq=None, recorded=None):
    cmd = [binary, "fit", "--json", "--budget", str(int(budget)), snap]
    if batch:
        cmd += ["--batch", str(batch)]
    if seq:
        cmd += ["--seq", str(seq)]
    if recorded:
        cmd += ["--recorded", recorded]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return {"error": p.stderr[-1000:]}
    return json.loads(p.stdout)


def plan_runs(name, w, answer, budget):
    """Every plan the answer gives, as a measured run under the budget."""
    runs = []
    mods = answer["model"].get("modules") or []
    for pl in answer.get("plans") or []:
        v = pl["variant"]
        run = {"name": name, "label": pl["title"], "kind": pl["kind"], "batch": answer["target"]["batch"],
               "seq": answer["target"]["seq"], "cap": budget, "predicted": pl["predicted"],
               "micro_batch": v.get("micro_batch"), "accumulation": v.get("accumulation"),
               "checkpoint": [mods[i]["name"] for i in v.get("checkpoint") or []],
               "expandable": bool(v.get("expandable_segments")), "extra_time": pl.get("extra_time", 0)}
        if v.get("optimizer_8bit"):
            try:
                import bitsandbytes  # noqa: F401
                run["optimizer_8bit"] = "bitsandbytes"
            except ImportError:  # the device has none: bnb's state layout, in plain torch
                run["optimizer_8bit"] = "stand-in (examples/fit/verify_fit.py adamw8bit_stand_in)"
        runs.append(run)
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--child")
    ap.add_argument("--snapshots", help="DIR: plan from the recordings (and fit_verify.json) of an earlier run "
                    "instead of recording again; the earlier run's measurements of the sizes stay, only plans run")
    ap.add_argument("--trace", action="append", default=[], metavar="NAME:BxS:MICROxACC:MOD,MOD",
                    help="record the second step of this plan, uncapped, into OUT/trace_<NAME>_<i>.pickle, and stop")
    ap.add_argument("--margin-budgets", action="store_true",
                    help="also plan 8x the recorded batch for a budget between its allocated and reserved peaks "
                    "(where expandable_segments is the plan)")
    ap.add_argument("--plan-only", action="store_true",
                    help="with --snapshots: plan and write OUT/fit_verify.json, measure nothing (no GPU needed)")
    ap.add_argument("--reuse", metavar="FILE",
                    help="a fit_verify.json of an earlier run: a plan run there as it is planned now (same workload, "
                    "size, budget and variant) keeps that measurement (marked reused_from) and is not run again")
    args = ap.parse_args()
    if args.plan_only and not args.snapshots:
        ap.error("--plan-only plans from the recordings of --snapshots")
    os.makedirs(args.out, exist_ok=True)
    if args.trace:
        return trace_plans(args)
    t0 = time.time()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    pool = concurrent.futures.ThreadPoolExecutor(4)
    # 1. record
    jobs = {n: {"what": "record", "workload": w, "out": os.path.join(args.out, "fit_%s_bs%d.pickle" % (n, w["batch"]))}
            for n, w in WORKLOADS.items()}
    jobs["oom"] = {"what": "oom", "workload": OOM, "out": os.path.join(args.out, "fit_oom_bs16.pickle")}
    if args.snapshots:
        for j in jobs.values():
            j["out"] = os.path.join(args.snapshots, os.path.basename(j["out"]))
        with open(os.path.join(args.snapshots, "fit_verify.json")) as f:
            recorded = json.load(f)["recorded"]
    else:
        recorded = dict(zip(jobs, pool.map(spawn, jobs.values())))
    print("recorded", json.dumps(recorded), flush=True)
    # 2. predict and plan
    runs, answers = [], {}
    for n, w in WORKLOADS.items():
        snap, rec = jobs[n]["out"], "%dx%d" % (w["batch"], w["seq"])
        for b, s in [(w["batch"], w["seq"]), (2 * w["batch"], w["seq"]), (4 * w["batch"], w["seq"]), (8 * w["batch"], w["seq"]),
                     (w["batch"], 2 * w["seq"]), (2 * w["batch"], 4 * w["seq"])]:
            a = fit(args.bin, snap, 1 << 40, b, s, rec)
            answers["%s %dx%d" % (n, b, s)] = a
            if "error" not in a and not args.snapshots:
                runs.append({"name": n, "label": "as it is", "kind": "predict", "batch": b, "seq": s, "predicted": a["as_is"]})
        target = 8 * w["batch"]
        asis = answers["%s %dx%d" % (n, target, w["seq"])]
        if "error" in asis:
            continue
        budgets = [int(share * asis["as_is"]["peak_reserved"]) for share in (0.6, 0.4)]
        if args.margin_budgets:  # what tensors hold fits, the allocator's segments do not
            budgets.append(int((asis["as_is"]["peak_allocated"] + asis["as_is"]["peak_reserved"]) / 2 / 0.95))
        for budget in budgets:
            a = fit(args.bin, snap, budget, target, w["seq"], rec)
            answers["%s plan %dx%d in %d" % (n, target, w["seq"], budget)] = a
            if "error" not in a:
                runs += plan_runs(n, w, a, budget)
    if not recorded["oom"].get("error") and recorded["oom"].get("oom"):
        print("planning for the OOM", flush=True)
        cap = recorded["oom"]["cap"]
        for snap, label in [(jobs["oom"]["out"], "oom"), (jobs["oom"]["out"].replace(".pickle", "_notrace.pickle"), "oom_notrace")]:
            a = fit(args.bin, snap, cap, recorded="%dx%d" % (OOM["batch"], OOM["seq"]))
            answers[label] = a
            if "error" not in a:
                runs += plan_runs(label, OOM, a, cap)
    # 3. measure
    def measure(run):
        if run.get("skip"):
            return {"skipped": run["skip"]}
        w = OOM if run["name"].startswith("oom") else WORKLOADS[run["name"]]
        env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if run.get("expandable") else {}
        return spawn({"what": "measure", "workload": w, "run": run}, env)
    doc = {"started_utc": started, "steps": STEPS, "recorded": recorded, "runs": runs, "answers": answers}
    if args.reuse:
        reuse(runs, args.reuse)
    if args.plan_only:
        for r in runs:
            r.setdefault("measured", {})

    def save():
        doc["seconds"] = round(time.time() - t0, 1)
        with open(os.path.join(args.out, "fit_verify.json"), "w") as f:
            json.dump(doc, f, indent=1)
    save()  # a run cut short by the time limit still leaves what it measured
    futures = {pool.submit(measure, run): run for run in runs if "measured" not in run}
    for fut in concurrent.futures.as_completed(futures):
        futures[fut]["measured"] = fut.result()
        save()
    for r in runs:
        m, p = r.get("measured", {}), r["predicted"]
        if "max_allocated" in m and not m.get("oom"):
            print("%-12s %-8s %-60s pred %6.2f GiB meas %6.2f GiB (%+.1f%%)" % (r["name"], "%dx%d" % (r["batch"], r["seq"]),
                  r["label"][:60], p["peak_allocated"] / 2**30, m["max_allocated"] / 2**30,
                  100 * (p["peak_allocated"] / m["max_allocated"] - 1)))
        else:
            print(r["name"], r["label"], json.dumps(m)[:300])
    print("done in %.0f s" % (time.time() - t0))


def run_key(r):
    """What makes two plan runs the same run: workload, size, budget, variant."""
    return json.dumps([r["name"], r["batch"], r["seq"], r.get("cap"), r.get("micro_batch") or 0,
                       r.get("accumulation") or 0, r.get("checkpoint") or [], bool(r.get("expandable")),
                       bool(r.get("optimizer_8bit"))])


def reuse(runs, path):
    """Give each run measured in the earlier run at path that measurement."""
    with open(path) as f:
        old = json.load(f)
    done = {run_key(r): r for r in old.get("runs", []) if r.get("cap") and "max_allocated" in (r.get("measured") or {})}
    n = 0
    for r in runs:
        o = done.get(run_key(r))
        if o is not None and r.get("cap"):
            r["measured"] = dict(o["measured"], reused_from="%s (%s)" % (os.path.basename(path), old.get("started_utc")))
            n += 1
    print("reused %d of %d runs from %s" % (n, len(runs), path), flush=True)


def trace_plans(args):
    jobs = []
    for i, spec in enumerate(args.trace):
        name, bs, ma, mods = (spec.split(":") + [""])[:4]
        w = OOM if name.startswith("oom") else WORKLOADS[name]
        b, sq = (int(x) for x in bs.split("x"))
        m, a = (int(x) for x in ma.split("x"))
        run = {"name": name, "batch": b, "seq": sq, "micro_batch": m, "accumulation": a,
               "checkpoint": [x for x in mods.split(",") if x]}
        jobs.append({"what": "trace", "workload": w, "run": run,
                     "out": os.path.join(args.out, "trace_%s_%d.pickle" % (name, i))})
    pool = concurrent.futures.ThreadPoolExecutor(4)
    res = list(pool.map(lambda j: spawn(j, timeout=300), jobs))
    doc = [{"spec": s, "run": j["run"], "file": os.path.basename(j["out"]), "result": r}
           for s, j, r in zip(args.trace, jobs, res)]
    with open(os.path.join(args.out, "fit_traces.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2])
    else:
        main()
