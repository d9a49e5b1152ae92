"""Block statistics of a same-run A/B (overhead_cycle.sh with RAW set).

    python3 examples/e2e/cycle_stats.py RAW.json [--block 100 --settle 10 --modes off,sampled]

train.py cycles the agent's modes every BLOCK steps; this recomputes, from
every step's time, the median slowdown of each mode against "off", and how
far block-to-block variation lets one trust it: the spread of block medians,
paired comparisons (each block against its neighbours) and a bootstrap over
blocks. The first block and the first SETTLE steps of each are left out, as
train.py leaves them out of its own medians.
"""
import argparse
import json
import random
import statistics


def blocks_of(steps, block, settle, modes):
    out = {m: [] for m in modes}
    for b in range(1, len(steps) // block):
        out[modes[b % len(modes)]].append(steps[b * block + settle:(b + 1) * block])
    return out


def flat(bls):
    return [x for bl in bls for x in bl]


def stats(raw, block, settle, modes, seed=1, rounds=2000):
    steps = raw["step_ms"]
    bl = blocks_of(steps, block, settle, modes)
    base = flat(bl[modes[0]])
    rows = {}
    for m in modes[1:]:
        cur = flat(bl[m])
        slow = statistics.median(cur) / statistics.median(base) - 1
        # paired: each block of m against the mean median of the blocks around it
        med = [statistics.median(steps[b * block + settle:(b + 1) * block]) for b in range(1, len(steps) // block)]
        diffs = []
        for i, v in enumerate(med):
            if modes[(i + 1) % len(modes)] != m:
                continue
            near = [med[j] for j in (i - 1, i + 1) if 0 <= j < len(med) and modes[(j + 1) % len(modes)] == modes[0]]
            if near:
                diffs.append(v / statistics.fmean(near) - 1)
        rng = random.Random(seed)
        boot = sorted(statistics.median(flat(rng.choices(bl[m], k=len(bl[m])))) /
                      statistics.median(flat(rng.choices(bl[modes[0]], k=len(bl[modes[0]])))) - 1 for _ in range(rounds))
        block_meds = [statistics.median(b) for b in bl[modes[0]]]
        rows[m] = {"blocks": len(bl[m]), "steps": len(cur), "median_slowdown": round(slow, 4),
                   "mean_slowdown": round(statistics.fmean(cur) / statistics.fmean(base) - 1, 4),
                   "paired_mean": round(statistics.fmean(diffs), 4) if diffs else None,
                   "paired_se": round(statistics.stdev(diffs) / len(diffs) ** 0.5, 4) if len(diffs) > 1 else None,
                   "bootstrap_90": [round(boot[int(0.05 * rounds)], 4), round(boot[int(0.95 * rounds)], 4)],
                   "off_block_median_sd": round(statistics.stdev(block_meds) / statistics.fmean(block_meds), 4)}
    return rows


def decomposition(raw, block, settle, modes, mode="sampled", seed=1, rounds=2000, steady_share=None):
    """The default mode's mean cost per step from parts that can each be
    measured tightly on a noisy host, instead of from the difference of two
    noisy block medians:
      recorded share x what a recorded step costs (each recorded step against
      the median of the unrecorded steps of its own block: neighbours in time,
      so slow drift of the host cancels), plus
      the agent's own time per step (its step hook and backward wrapper on the
      training thread, and its threads' CPU time, counted as if all of it took
      the GIL from training: an upper bound), as the agent measured it.
    """
    steps, rec = raw["step_ms"], set(raw.get("recorded_steps", []))
    per_block, wall = [], {}
    for b in range(1, len(steps) // block):
        if modes[b % len(modes)] != mode:
            continue
        idx = range(b * block + settle, (b + 1) * block)
        between = [steps[i] for i in idx if i not in rec]
        recorded = [steps[i] for i in idx if i in rec]
        wall[b] = sum(steps[b * block:(b + 1) * block]) / 1000
        if between:
            m = statistics.median(between)
            per_block.append((len(recorded), len(between), [r / m - 1 for r in recorded]))
    if not per_block:
        return None
    n_rec = sum(p[0] for p in per_block)
    share = n_rec / sum(p[0] + p[1] for p in per_block)
    ratios = [x for p in per_block for x in p[2]]
    rng = random.Random(seed)
    boot = sorted(statistics.fmean(rng.choices(ratios, k=len(ratios))) for _ in range(rounds)) if ratios else [0.0]
    own = [c for c in raw.get("agent_cost", []) if c["block"] in wall]
    own_s = sum(c["hook_s"] + c["backward_wrapper_s"] + c["agent_threads_cpu_s"] for c in own)
    own_share = own_s / sum(wall[c["block"]] for c in own) if own else None
    rec_cost = statistics.fmean(ratios) if ratios else 0.0
    out = {"recorded_share": round(share, 4), "recorded_steps": n_rec,
           "recorded_step_cost_mean": round(rec_cost, 4),
           "recorded_step_cost_bootstrap_90": [round(boot[int(0.05 * len(boot))], 4),
                                               round(boot[min(len(boot) - 1, int(0.95 * len(boot)))], 4)],
           "agent_own_share": round(own_share, 5) if own_share is not None else None,
           "agent_blocks_measured": len(own)}
    hi = boot[min(len(boot) - 1, int(0.95 * len(boot)))]
    # The blocks' recorded share is not the steady state's when a block is not
    # a whole number of sampling periods: steady_share (window / every, the
    # agent's default) weighs the recorded step's cost instead when given.
    if steady_share is not None:
        out["steady_share"] = steady_share
        share = steady_share
    out["mean_cost_estimate"] = round(share * rec_cost + (own_share or 0.0), 4)
    out["mean_cost_upper_90"] = round(share * hi + (own_share or 0.0), 4)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--block", type=int, default=100)
    ap.add_argument("--settle", type=int, default=10)
    ap.add_argument("--modes", default="off,sampled")
    ap.add_argument("--steady-share", type=float, default=None,
                    help="the sampled mode's recorded share in a long run (window/every: 0.02 by default)")
    a = ap.parse_args()
    with open(a.raw) as f:
        raw = json.loads(f.read())
    modes = a.modes.split(",")
    out = stats(raw, a.block, a.settle, modes)
    for m in modes[1:]:
        if m.startswith("sampled"):
            out[m]["decomposition"] = decomposition(raw, a.block, a.settle, modes, m, steady_share=a.steady_share)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
