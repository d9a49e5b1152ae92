"""What the agent's per-step levels cost a training step (docs/road-to-oom.md),
side by side in one process under `vramscope run` (VRAMSCOPE_RECORD=0: no
recording windows in either mode): GPT-2 steps in blocks of BLOCK, the
agent's levels on and off in turn (ABBA), the first SETTLE steps of each
block not counted (an "on" block starts the levels anew: the root discovery,
the first strides, the roots' post-hooks for QUIET_STEPS steps). Each step
ends with torch.cuda.synchronize() (the benchmark's, in both modes). Prints
a JSON line per config: the median step of each mode, the paired block
differences' median, the agent's own measure of its time per step
(Levels.cost_s) over the counted steps (own_s_per_step) and over the whole
block as run1 and run2 measured it (own_block_s_per_step), the share of
steps read, and the cost of one allocator read (Reader.read) alone.
jupyter/tests/bench_levels.py is its proxy on the CPU (a fake reader)."""
import json
import statistics
import sys
import time

import torch

import common
from vramscope.agent import _agent

BLOCK, SETTLE, BLOCKS, WARMUP = 200, 100, 8, 30


def levels_off(a):
    a.levels.stop()  # the hooks and the peak wrappers
    a.levels.levels = None


def run(layers, embd, heads, batch, seq):
    a = _agent._agent
    model = common.gpt2(layers=layers, embd=embd, heads=heads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")

    def step():
        t = time.perf_counter()
        common.train_step(model, opt, ids)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    for _ in range(WARMUP):
        step()
    on_first = [True, False, False, True]
    blocks = []
    for b in range(BLOCKS):
        on = on_first[b % 4]
        if on and a.levels.levels is None:
            a._start_levels(torch)
        if not on and a.levels.levels is not None:
            levels_off(a)
        lv = a.levels.levels
        b0 = (lv.cost_s, common.steps(lv)) if lv else None
        for _ in range(SETTLE):
            step()
        c0, n0, r0 = (lv.cost_s, common.steps(lv), lv.reads) if lv else (0.0, 0, 0)
        times = [step() for _ in range(BLOCK - SETTLE)]
        blk = {"on": on, "median_s": statistics.median(times)}
        if lv:
            n = max(1, common.steps(lv) - n0)
            blk.update(own_s_per_step=(lv.cost_s - c0) / n, own_block_s_per_step=(lv.cost_s - b0[0]) / (common.steps(lv) - b0[1]),
                       read_share=(lv.reads - r0) / n, stride=lv.stride, posted=lv.posted,
                       sparse=getattr(lv, "sparse", None),
                       estimates=common.estimates(lv))
        blocks.append(blk)
    lv = a.levels.levels or (a._start_levels(torch) or a.levels.levels)
    step()
    step()
    reads, cold = [], []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(1000):
            lv.reader.read()
        reads.append((time.perf_counter() - t) / 1000)
    for _ in range(30):  # one read right after a step, as the hook reads
        step()
        t = time.perf_counter()
        lv.reader.read()
        cold.append(time.perf_counter() - t)
    on = [b["median_s"] for b in blocks if b["on"]]
    off = [b["median_s"] for b in blocks if not b["on"]]
    pairs = [blocks[i]["median_s"] - blocks[i + 1]["median_s"] if blocks[i]["on"] else
             blocks[i + 1]["median_s"] - blocks[i]["median_s"] for i in range(0, BLOCKS, 2)]
    own = [b["own_s_per_step"] for b in blocks if b["on"]]
    own_block = [b["own_block_s_per_step"] for b in blocks if b["on"]]
    med_off = statistics.median(off)
    return {"config": dict(layers=layers, embd=embd, batch=batch, seq=seq), "blocks": blocks,
            "median_on_s": statistics.median(on), "median_off_s": med_off,
            "paired_diff_median_s": statistics.median(pairs), "paired_diffs_s": pairs,
            "paired_diff_share": statistics.median(pairs) / med_off,
            "own_s_per_step_median": statistics.median(own), "own_share": statistics.median(own) / med_off,
            "own_block_s_per_step_median": statistics.median(own_block),
            "read_share_median": statistics.median(b["read_share"] for b in blocks if b["on"]),
            "read_s_median": statistics.median(reads), "read_after_step_s_median": statistics.median(cold),
            "stride_end": lv.stride, "strides": dict(lv.strides), "base_s": lv.base, "extra_s": lv.extra,
            "levels_sent_dropped": lv.dropped}


def main():
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                      "agent": _agent.status().get("registered"),
                      "torch_C_memory": sorted(n for n in dir(torch._C) if "emory" in n or "Stats" in n)}), flush=True)
    for name, cfg in (("gpt2_124m_b8_s512", (12, 768, 12, 8, 512)), ("gpt2_2l_b4_s128", (2, 256, 4, 4, 128))):
        print(json.dumps({name: run(*cfg)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
