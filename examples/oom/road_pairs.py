"""What the agent's per-step levels cost a training step, step by step side
by side, to a few microseconds (docs/road-to-oom.md, "Step by step").

road_cost.py compares blocks of steps; the host's speed drifts by more than
the 0.1% it is after (±1-2 ms on 35 ms steps). Here the variants take turns
step by step: each round runs one step of every variant in a shuffled order,
and each variant's step is set against the "off" step of the same round, so
the drift cancels and what is left is each step's own noise, which thousands
of rounds bring down to a few microseconds. Each step ends with
torch.cuda.synchronize(), so what the hooks add on the CPU is in the step.

The variants (their hooks put in place before the step and taken away after
it, neither timed):
  off         nothing of the agent's
  both_empty  an empty optimizer post-hook (torch.optim's global) and an
              empty forward pre-hook (with kwargs) on the root: torch's
              dispatch of two hooks, the floor of a design with both
  agent       the agent's Levels and its hooks as in steady training (the
              root's pre-hook, the optimizer's post-hook through
              _torch.register_step_hook), its strides, and whether the
              root's pre-hook runs between reads (sparse), frozen at what it
              chose over WARMUP steps that all ran with it (it sees only its
              own steps here, so its budget would take the others' time for
              its steps')
  before      the same for another _levels.py (OTHER, an earlier version)

No daemon: the Levels is started directly (as the agent does at CUDA's
start). Prints one JSON line per model: each variant's step minus the off
step of its round (mean and median with 95% intervals, in seconds and as a
share of the off step's median), the same for the two calls the hooks run in
(hooked_calls: the root's call and opt.step(), which only queue GPU work, so
their difference is the hooks' time on the training thread with torch's
dispatch of them, at a fraction of the whole step's noise), the agent's own
measure of its time per step (Levels.cost_s) and the share of steps it read.

    PYTHONPATH=jupyter:examples/oom:examples/inference python3 examples/oom/road_pairs.py [ROUNDS [OTHER]]
"""
import importlib.util
import json
import random
import statistics
import sys
import time

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

import common
import stats
from vramscope.agent import _levels, _torch

WARMUP = 300
VARIANTS = ("off", "both_empty", "agent", "before")


def _empty_opt(_opt, _args, _kwargs):
    return None


def _empty_pre(_module, _args, _kwargs):
    return None


def load_other(path):
    """Another _levels.py as a module of the agent's package."""
    spec = importlib.util.spec_from_file_location("vramscope.agent._levels_other", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Agent:
    """One version's Levels, started as the agent starts it; its hooks go and come."""

    def __init__(self, mod):
        self.lv, (self.handle, self.roots) = mod.start(torch, (False,), torch.cuda.current_device,
                                                       _torch.register_step_hook)

    def freeze(self):
        lv = self.lv
        self.strides = dict(lv.strides)
        lv.budget_next = 1 << 62  # frozen: _read's next read comes after the stride
        lv._budget = lambda _n, _phase: None
        self.mark = (lv.cost_s, common.steps(lv), lv.reads)

    def enter(self):
        """The hooks back as the agent left them: resume gives the roots
        root_pre (and takes every step to the slow path), so a sparse
        agent's roots lose it again and its fast path is armed as it was."""
        self.roots.resume()
        if not self.full:
            self.lv._full_pre(False)
        if self.due:
            self.lv._arm(self.due)
        hook = getattr(self.lv, "hook", None)  # the fast one (Levels.step_hook), registered as start() does
        self.handle = (_torch.register_step_hook(torch, hook, direct=True) if hook is not None
                       else _torch.register_step_hook(torch, self.lv.on_optimizer_step))

    def leave(self):
        self.full = getattr(self.lv, "pre_full", True)
        self.due = self.lv.due if getattr(self.lv, "armed", False) else 0
        self.roots.pause()
        self.handle.remove()

    def figures(self):
        lv = self.lv
        c0, n0, r0 = self.mark
        n = max(1, common.steps(lv) - n0)
        return {"own_s_per_step": (lv.cost_s - c0) / n, "read_share": (lv.reads - r0) / n, "steps": n,
                "strides": self.strides, "sparse": getattr(lv, "sparse", None), "posted": lv.posted,
                "roots": len(self.roots.roots),
                "estimates": common.estimates(lv)}  # at the freeze


def take_turns(model, step, variants, other, rounds):
    """The agents started (this _levels and OTHER's), WARMUP steps with them
    all on, then rounds of one step() of each variant in a shuffled order, the
    hooks of a variant there for its step only. Returns (agents, rows, warm):
    rows[v] the (step()'s result, whether the agent read) of each round."""

    def empty():
        return [register_optimizer_step_post_hook(_empty_opt), model.register_forward_pre_hook(_empty_pre, with_kwargs=True)]

    agents = {"agent": Agent(_levels)}
    if "before" in variants:
        agents["before"] = Agent(other)
    warm = [step() for _ in range(WARMUP)]  # the agents on: discovery, strides, post-hooks gone
    for a in agents.values():
        a.leave()
        a.freeze()
    rng = random.Random(33)
    rows = {v: [] for v in variants}
    order = list(variants)
    for _ in range(rounds):
        rng.shuffle(order)
        for v in order:
            a = agents.get(v)
            k0 = 0
            if a:
                a.enter()
                k0 = a.lv.reads
            hs = empty() if v == "both_empty" else []
            got = step()
            rows[v].append((got, bool(a and a.lv.reads != k0)))
            if a:
                a.leave()
            for h in hs:
                h.remove()
    return agents, rows, warm


def run(layers, embd, heads, batch, seq, rounds, variants, other):
    model = common.gpt2(layers=layers, embd=embd, heads=heads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")

    def step():
        """common.train_step's work, timed whole (to the GPU's end) and in the
        two calls the hooks run in: the root's call (its pre-hook) and
        opt.step() (the optimizer's post-hook, a read), which only queue work
        for the GPU; their wall time is the training thread's, hooks and
        torch's dispatch of them included. Returns (whole, hooked calls)."""
        pc = time.perf_counter
        t = pc()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        t1 = pc()
        out.loss.backward()
        t2 = pc()
        opt.step()
        t3 = pc()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t4 = pc()
        return t4 - t, (t1 - t) + (t3 - t2)

    agents, rows, warm = take_turns(model, step, variants, other, rounds)
    times = {v: [r[0][0] for r in rows[v]] for v in variants}
    calls = {v: [r[0][1] for r in rows[v]] for v in variants}
    off = times["off"]
    ref = statistics.median(off)
    out = {"config": dict(layers=layers, embd=embd, batch=batch, seq=seq), "rounds": rounds,
           "off_hooked_calls_median_s": statistics.median(calls["off"]),
           "warmup_median_s": statistics.median(w[0] for w in warm[WARMUP // 2:]), "off_median_s": ref}
    for v in variants:
        if v == "off":
            continue
        d = stats.describe([a - b for a, b in zip(times[v], off)])
        d["share_mean"] = d["mean"] / ref
        d["share_ci95"] = d["ci95"] and [x / ref for x in d["ci95"]]
        d["share_median"] = d["median"] / ref
        c = stats.describe([a - b for a, b in zip(calls[v], calls["off"])])
        c["share_mean"] = c["mean"] / ref
        c["share_ci95"] = c["ci95"] and [x / ref for x in c["ci95"]]
        d["hooked_calls"] = c
        out[v] = d
    for v, a in agents.items():
        out[v].update(a.figures())
    return out


def main(run_fn=run, rounds=1200, big=4):
    """ROUNDS [OTHER] from the command line: run_fn on the 2-layer model, and
    on 124M with 1/big of the rounds; one JSON line each."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else rounds
    other = load_other(sys.argv[2]) if len(sys.argv) > 2 else None
    variants = VARIANTS if other else VARIANTS[:-1]
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                      "python": sys.version.split()[0]}), flush=True)
    for name, cfg, r in (("gpt2_2l_b4_s128", (2, 256, 4, 4, 128), rounds),
                         ("gpt2_124m_b8_s512", (12, 768, 12, 8, 512), rounds // big)):
        print(json.dumps({name: run_fn(*cfg, r, variants, other)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
