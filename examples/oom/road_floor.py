"""Where the per-step levels' own time goes on short steps (docs/road-to-oom.md,
"The floor"): GPT-2 with 2 layers of 256, batch 4 x 128, trained for 3,000 steps
with the agent's Levels started directly (as the agent does at CUDA's start, no
daemon). Each step's share of Levels.cost_s is split by whether the step was
read: the steps between reads pay the optimizer's post-hook alone (in sparse
mode its fast path, untimed: counted in estimates' fast_n); a read step pays
the read, the root's pre-hook and the budget. Prints one JSON line (microseconds).

    PYTHONPATH=jupyter:examples/oom python3 examples/oom/road_floor.py
"""
import json
import statistics
import time

import torch

import common
from vramscope.agent import _levels, _torch

STEPS, SKIP = 3000, 1000  # the first SKIP steps (discovery, the first strides) not counted


def main():
    lv, _hooks = _levels.start(torch, (False,), torch.cuda.current_device, _torch.register_step_hook)
    model = common.gpt2(layers=2, embd=256, heads=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (4, 128), device="cuda")
    rows = []  # (own s, reads, root pre-hook s, read s, the step's wall s)
    for _ in range(STEPS):
        c0, k0, p0, r0 = lv.cost_s, lv.reads, lv.pre_s, lv.read_s
        t = time.perf_counter()
        common.train_step(model, opt, ids)
        torch.cuda.synchronize()
        rows.append((lv.cost_s - c0, lv.reads - k0, lv.pre_s - p0, lv.read_s - r0, time.perf_counter() - t))
    late = rows[SKIP:]
    between = [r for r in late if not r[1]]
    read = [r for r in late if r[1]]

    def us(xs, f=statistics.mean):
        return round(f(xs) * 1e6, 3)

    print(json.dumps({
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
        "sparse": lv.sparse, "strides": lv.strides, "step_median_ms": round(statistics.median(r[4] for r in late) * 1e3, 3),
        "estimates_us": {k: round(v * 1e6, 3) if isinstance(v, float) else v for k, v in common.estimates(lv).items()},
        "between_reads": {"steps": len(between), "own_median_us": us([r[0] for r in between], statistics.median),
                          "own_mean_us": us([r[0] for r in between]), "pre_mean_us": us([r[2] for r in between])},
        "read_steps": {"steps": len(read), "own_median_us": us([r[0] for r in read], statistics.median),
                       "own_mean_us": us([r[0] for r in read]), "pre_mean_us": us([r[2] for r in read]),
                       "read_mean_us": us([r[3] for r in read])},
        "own_mean_us": us([r[0] for r in late])}))


if __name__ == "__main__":
    main()
