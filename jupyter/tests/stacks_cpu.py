"""Runs the agent's stack sampler (vramscope.agent._stacks) in real CPU programs whose
idle time is known by construction, and writes what the daemon's join
(profiler/idle) reads: the samples, and a utilisation series built from the
program's own clock (the "GPU" idles exactly while the program says it does,
its utilization.gpu read once a second as the share of that second it was
busy, rounded to a whole percent as NVML reports it).

  collective RANK INITFILE OUT.json   two ranks of torch.distributed (gloo);
      rank 1 sleeps before each all_reduce, rank 0 runs the sampler and waits
      in all_reduce: its GPU would idle while it waits.
  sync FRACTION OUT.json               one process: a step's "GPU work" is a
      wait in `.item()` (the host waits while the GPU works), then
      FRACTION of the step is host-side work with nothing queued on the GPU.

test_stacks_cpu.py runs them (collective under the torch interpreter make
setup builds); the recordings in profiler/idle/testdata come from here.
"""
import functools
import json
import math
import os
import sys
import time

from vramscope.agent import _stacks

HZ = 50  # the sampler's rate here: twice the default, for more samples in a short run
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def now_ms():
    return time.time() * 1000


class Recorder:
    """The sampler with a send that keeps its batches, decoded to the join's
    samples (profiler/idle.Sample)."""

    def __init__(self):
        self.batches = []
        self.s = _stacks.Sampler(lambda method, params: self.batches.append(params), hz=HZ)

    def __enter__(self):
        self.s.start()
        return self

    def __exit__(self, *exc):
        self.s.stop.set()
        self.s.thread.join(2)
        self.s.flush()

    def samples(self):
        out = []
        for b in self.batches:
            for x in b["samples"]:
                th = b["threads"][x["th"]]
                stack = []
                for i in x.get("s", []):
                    f = dict(b["frames"][i])
                    f["file"] = os.path.relpath(f["file"], REPO) if f["file"].startswith(REPO) else f["file"]
                    stack.append(f)
                s = {"time_ms": x["t"], "thread": th["name"], "main": bool(th.get("main")), "stack": stack}
                if x.get("w"):
                    s["wait"] = x["w"]
                out.append(s)
        return out

    def dropped(self):
        return sum(b["dropped"] for b in self.batches)


def util_series(idle, first_ms, last_ms):
    """One reading a second inside [first_ms, last_ms]: the share of the
    second before it that was not in an idle interval, in whole percent."""
    out = []
    t = math.ceil(first_ms / 1000) * 1000
    while t <= last_ms:
        lo = t - 1000
        gone = sum(max(0.0, min(b, t) - max(a, lo)) for a, b in idle)
        out.append({"time_ms": int(t), "gpu": round(100 * (1 - gone / 1000)), "sm_active": -1, "pcie_mbps": -1})
        t += 1000
    return out


def write(out, rec, idle, facts):
    ss = rec.samples()
    main = [s["time_ms"] for s in ss if s["main"]]
    util = util_series(idle, main[0], main[-1])
    lo, hi = util[0]["time_ms"], util[-1]["time_ms"]  # the windows between readings, as the join's
    gone = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in idle)
    facts = dict(facts, measure={"idle_share_measured": round(gone / (hi - lo), 4), "from_ms": lo, "to_ms": hi},
                 python=sys.version.split()[0], recorded_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    inp = {"pid": os.getpid(), "device": 0, "period_ms": 1000 / HZ, "dropped": rec.dropped(), "util": util,
           "samples": ss}
    with open(out, "w") as f:
        json.dump({"input": inp, "facts": facts, "idle_intervals_ms": [[round(a), round(b)] for a, b in idle]}, f)


def spin(seconds):
    """CPU work in torch (it releases the GIL, as GPU launches do)."""
    import torch

    a = torch.randn(192, 192)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)


def collective(rank, initfile, out, steps=5, compute_s=0.3, skew_s=1.2):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + initfile, rank=rank, world_size=2)
    x = torch.ones(1 << 14)
    dist.all_reduce(x)  # both ranks up: the connection is made outside the measure
    if rank == 1:
        for _ in range(steps):
            spin(compute_s)
            time.sleep(skew_s)  # the slow rank (its data loading, an uneven batch)
            dist.all_reduce(x)
        dist.destroy_process_group()
        return
    waits = []
    with Recorder() as rec:
        time.sleep(0.1)
        for _ in range(steps):
            spin(compute_s)
            t0 = now_ms()
            dist.all_reduce(x)  # COLLECTIVE: rank 0 waits here for rank 1
            waits.append((t0, now_ms()))
        time.sleep(0.1)
    dist.destroy_process_group()
    write(out, rec, waits, {"name": "collective_cpu", "torch": torch.__version__, "steps": steps,
                            "workload": "2 ranks, gloo, file:// store; each step %.1f s of torch CPU work, then "
                                        "all_reduce; rank 1 sleeps %.1f s before it" % (compute_s, skew_s)})


class FakeGPU:
    """A value whose .item() waits as a sync waits for the GPU's queue: a C
    call on the user's line (no Python frame of its own), as a tensor's is."""

    def __init__(self, s):
        self.item = functools.partial(time.sleep, s)


def sync(fraction, out, seconds=6.0, step_s=0.05):
    host_s = step_s * fraction
    gpu = FakeGPU(step_s - host_s)
    idle, total = [], 0.0
    with Recorder() as rec:
        time.sleep(0.1)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            v = gpu.item() or 1.0  # SYNC: the host waits for the step's GPU work
            t0 = now_ms()
            time.sleep(host_s)  # HOST: host-side work, nothing queued on the GPU
            total += v
            idle.append((t0, now_ms()))
        time.sleep(0.1)
    write(out, rec, idle, {"name": "sync_cpu_%g" % fraction, "fraction": fraction, "step_ms": 1000 * step_s,
                           "workload": "a %.0f ms step: a wait in .item() while the GPU works, then %.1f ms of host "
                                       "work with the GPU idle" % (1000 * step_s, 1000 * host_s)})


if __name__ == "__main__":
    if sys.argv[1] == "collective":
        collective(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sync(float(sys.argv[2]), sys.argv[3])
