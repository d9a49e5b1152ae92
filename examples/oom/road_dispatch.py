"""What the per-step levels add where their hooks run, torch's dispatch of
them included, to a fraction of a microsecond (docs/road-to-oom.md, "Where
the hooks run").

road_pairs.py sets whole steps (or the two calls the hooks run in) side by
side; a forward call's own noise (tens of microseconds) is still in each
difference. Here only the stretches of the step the hooks run in are timed,
on the training thread, in the step as it is (the GPU's work queued, the
caches as a real step leaves them):
  call   from just before the root's call to the first line of its forward:
         torch's _call_impl with or without hooks, and the roots' pre-hooks
         (the forward is the model's own, called through an instance
         attribute that notes the clock, in every variant alike)
  post   from the optimizer's _optimizer_step_code (the empty method torch
         calls after the update, just before the post-hooks) to opt.step()'s
         return: torch's loop over the post-hooks and the agent's hook
Each round runs one step of every variant in a shuffled order (as
road_pairs.py: off, both_empty, agent, and before, another _levels.py), each
set against the round's off step. The agent's steps are split into those
between reads and read steps (a read step's hooks read the allocator and
swap the roots' pre-hooks). Prints one JSON line per model (microseconds):
each variant's call + post difference (mean and median with 95% intervals),
the agent's read share, and its whole estimate per step:
between-read difference x (1 - read share) + read-step difference x read
share, against the off step's median.

    PYTHONPATH=jupyter:examples/oom:examples/inference python3 examples/oom/road_dispatch.py [ROUNDS [OTHER]]
"""
import statistics
import sys
import time

import torch

import common
import stats
import road_pairs

VARIANTS = ("off", "both_empty", "agent", "before")


def run(layers, embd, heads, batch, seq, rounds, variants, other):
    model = common.gpt2(layers=layers, embd=embd, heads=heads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")
    pc = time.perf_counter
    marks = [0.0, 0.0]
    fwd = model.forward

    def forward(*args, **kwargs):
        marks[0] = pc()
        return fwd(*args, **kwargs)

    def step_code():
        marks[1] = pc()

    model.forward = forward  # an instance attribute: _call_impl calls it as the forward
    opt._optimizer_step_code = step_code

    def step():
        """common.train_step's work; returns (whole, call, post) in seconds."""
        marks[0] = marks[1] = 0.0
        t = pc()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            t0 = pc()
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        t3 = pc()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t4 = pc()
        if not (marks[0] and marks[1]):
            raise SystemExit("road_dispatch: torch did not call the marks (model.forward, opt._optimizer_step_code)")
        return t4 - t, marks[0] - t0, t3 - marks[1]

    agents, turns, _warm = road_pairs.take_turns(model, step, variants, other, rounds)
    rows = {v: [(*got, read) for got, read in turns[v]] for v in variants}  # (whole, call, post, read)
    off = rows["off"]
    ref = statistics.median(r[0] for r in off)
    us = 1e6

    def diffs(v, pick):
        return [(r[1] + r[2] - o[1] - o[2]) * us for r, o in zip(rows[v], off) if pick(r)]

    def med(i):
        return statistics.median(r[i] for r in off) * us

    out = {"config": dict(layers=layers, embd=embd, batch=batch, seq=seq), "rounds": rounds,
           "off_step_median_ms": ref * 1e3, "off_call_median_us": med(1), "off_post_median_us": med(2)}
    for v in variants:
        if v == "off":
            continue
        d = {"hooks_us": stats.describe(diffs(v, lambda r: True)),
             "call_us_median": statistics.median((r[1] - o[1]) * us for r, o in zip(rows[v], off)),
             "post_us_median": statistics.median((r[2] - o[2]) * us for r, o in zip(rows[v], off))}
        a = agents.get(v)
        if a:
            between, read = diffs(v, lambda r: not r[3]), diffs(v, lambda r: r[3])
            share = len(read) / len(rows[v])
            d["between_reads_us"] = between and stats.describe(between)
            d["read_steps_us"] = read and stats.describe(read)
            est = {}
            for k in ("mean", "median"):
                per = ((d["between_reads_us"][k] * (1 - share) if between else 0.0)
                       + (d["read_steps_us"][k] * share if read else 0.0))
                est[k + "_us"] = per
                est[k + "_share"] = per / (ref * us)
            d["estimate_per_step"] = est
            d.update(a.figures())
        out[v] = d
    return out


def main():
    return road_pairs.main(run, 2000, 8)


if __name__ == "__main__":
    sys.exit(main())
