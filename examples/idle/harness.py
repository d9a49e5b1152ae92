"""What every idle program (examples/idle/*.py) shares: the phases, the idle
share measured inside the program, and the sampler's cost.

A program builds its workload and hands run() a step function step(i, gpu)
that brackets its GPU work with gpu.begin() / gpu.end(). run() then:

1. warms up (WARMUP_S) and sizes a block: the steps that take about BLOCK_S;
2. cost: 2 x COST_PAIRS blocks of that many steps, the agent's stack sampler
   off and on in ABBA order (off, on, on, off, ...), each block's mean step
   time kept (vramscope.agent._stacks.set_enabled: "off" leaves the sampler's
   thread waking at its rate without walking any stack);
3. measure: MEASURE_S with the sampler on; the GPU's busy time measured
   independently of NVML by CUDA events recorded at gpu.begin() and gpu.end()
   of every step (the time from the first kernel of a step's GPU work to the
   end of its last), idle = 1 - busy / wall;
4. turns the sampler off (the wait below is not the program's), writes
   OUT/NAME.json and the ready file, and waits for the driver's go file.
"""
import json
import os
import sys
import time

WARMUP_S = 2.0
BLOCK_S = 0.5
COST_PAIRS = 6
MEASURE_S = 12.0


class CudaBusy:
    """GPU busy time from CUDA events around each step's GPU work."""

    def __init__(self, torch):
        self.torch = torch
        self.pairs = []
        self.recording = False

    def begin(self):
        if self.recording:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            self.pairs.append([e, None])

    def end(self):
        if self.recording and self.pairs and self.pairs[-1][1] is None:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            self.pairs[-1][1] = e

    def busy_ms(self):
        self.torch.cuda.synchronize()
        return sum(a.elapsed_time(b) for a, b in self.pairs if b is not None)


def stacks():
    """The agent's stack sampler module (loaded by `vramscope run`'s bootstrap)."""
    try:
        from vramscope.agent import _stacks
        return _stacks
    except Exception:
        return None


def sampler_on(on):
    st = stacks()
    if st is not None:
        st.set_enabled(on)


def timed_steps(step, gpu, n, start, sync):
    t = time.perf_counter()
    for i in range(n):
        step(start + i, gpu)
    sync()
    return (time.perf_counter() - t) / n


def cost_blocks(step, gpu, per_block, start, sync):
    """Mean step time (ms) of each block, sampler off and on in ABBA order."""
    order = []
    for k in range(COST_PAIRS):
        order += ["off", "on"] if k % 2 == 0 else ["on", "off"]
    out = {"off": [], "on": []}
    i = start
    for mode in order:
        sampler_on(mode == "on")
        out[mode].append(1000 * timed_steps(step, gpu, per_block, i, sync))
        i += per_block
    sampler_on(True)
    return out, i


def cost_summary(blocks):
    on, off = blocks["on"], blocks["off"]
    mean_on, mean_off = sum(on) / len(on), sum(off) / len(off)
    diffs = sorted((a - b) / b for a, b in zip(on, off))
    return {"step_ms_on": round(mean_on, 3), "step_ms_off": round(mean_off, 3),
            "cost_share": round(mean_on / mean_off - 1, 5), "paired_median_share": round(diffs[len(diffs) // 2], 5)}


def measure(step, gpu, start, sync):
    sync()
    gpu.recording = True
    t0, w0 = time.perf_counter(), time.time()
    i = start
    while time.perf_counter() - t0 < MEASURE_S:
        step(i, gpu)
        i += 1
    sync()
    wall = time.perf_counter() - t0
    gpu.recording = False
    busy = gpu.busy_ms()
    return {"steps": i - start, "wall_ms": round(wall * 1000, 1), "busy_ms": round(busy, 1),
            "idle_share_measured": round(1 - busy / (wall * 1000), 4),
            "from_ms": int(w0 * 1000), "to_ms": int(time.time() * 1000)}, i


def run(name, step, gpu, sync, facts, cost_step=None, extra=None):
    """The phases above; facts are the program's own (model, sizes);
    cost_step, when given, is what the cost blocks time instead of step;
    extra() adds facts known only at the end."""
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    out, ready, go = args["--out"], args.get("--ready"), args.get("--go")
    t, i = time.perf_counter(), 0
    while time.perf_counter() - t < WARMUP_S:
        step(i, gpu)
        i += 1
    sync()
    per_step = (time.perf_counter() - t) / max(i, 1)
    per_block = max(2, int(BLOCK_S / per_step))
    blocks, i = cost_blocks(cost_step or step, gpu, per_block, i, sync)
    m, i = measure(step, gpu, i, sync)
    sampler_on(False)
    st = stacks()
    s = st.sampler() if st is not None else None
    facts.update(name=name, pid=os.getpid(), steps_per_block=per_block, cost=cost_summary(blocks), cost_blocks_ms=blocks,
                 measure=m, sampler_running=s is not None, sampler_hz=round(1 / s.period, 1) if s else None,
                 sampler_cpu_ms=round(s.cpu_ms, 1) if s else None, samples_sent=s.sent if s else None,
                 recorded_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    facts.update(extra() if extra else {})
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(facts, f, indent=1)
    if ready:
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
        end = time.time() + 120
        while go and not os.path.exists(go) and time.time() < end:
            time.sleep(0.05)
