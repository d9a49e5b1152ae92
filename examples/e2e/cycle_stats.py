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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--block", type=int, default=100)
    ap.add_argument("--settle", type=int, default=10)
    ap.add_argument("--modes", default="off,sampled")
    a = ap.parse_args()
    with open(a.raw) as f:
        raw = json.loads(f.read())
    print(json.dumps(stats(raw, a.block, a.settle, a.modes.split(",")), indent=1))


if __name__ == "__main__":
    main()
