"""Where a one-click capture's time goes, on a CUDA machine (a probe, not a test).

    python3 examples/e2e/probe_capture.py [ENTRIES] > probe.json

Fills the allocator's history ring with ENTRIES events (default 1,000,000)
from a few Python call sites, then times torch.cuda.memory._snapshot() with the
cyclic GC on (as a user calls it) and off, pickle protocol 4 and marshal of the
result, and checks whether re-arming _record_memory_history with another
context keeps the ring (the basis of sampling stacks one step in N).
"""
import gc
import inspect
import json
import marshal
import pickle
import sys
import time

import torch


def fill(n, depth=6):
    def leaf(k):
        xs = []
        for _ in range(k):
            xs.append(torch.empty(4096 + 512 * (len(xs) % 7), device="cuda"))
        del xs

    def nest(d, k):
        if d == 0:
            return leaf(k)
        return nest(d - 1, k)

    done = 0
    while done < n:
        nest(depth, 500)
        done += 1000  # alloc + free_requested per tensor (free_completed is not recorded by default)


def timed(f, repeat=2):
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        r = f()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, r


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    out = {"torch": torch.__version__, "python": sys.version.split()[0], "entries_goal": n,
           "record_memory_history_signature": str(inspect.signature(torch.cuda.memory._record_memory_history))}
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=n)
    fill(n)
    torch.cuda.synchronize()

    t_on, snap = timed(torch.cuda.memory._snapshot)
    entries = sum(len(t) for t in snap["device_traces"])
    gc.disable()
    t_off, _ = timed(torch.cuda.memory._snapshot)
    gc.enable()
    gc.freeze()
    t_frozen, _ = timed(torch.cuda.memory._snapshot)
    gc.unfreeze()
    out.update(entries=entries, snapshot_gc_on_s=t_on, snapshot_gc_off_s=t_off, snapshot_gc_frozen_s=t_frozen)

    t_p, b = timed(lambda: pickle.dumps(snap, protocol=4))
    gc.disable()
    t_p_off, _ = timed(lambda: pickle.dumps(snap, protocol=4))
    t_m, m = timed(lambda: marshal.dumps(snap))
    gc.enable()
    out.update(pickle4_s=t_p, pickle4_gc_off_s=t_p_off, pickle4_bytes=len(b), marshal_s=t_m, marshal_bytes=len(m))

    # Does re-arming with another context keep the ring?
    torch.cuda.memory._record_memory_history(enabled=None)
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=100000)
    xs = [torch.empty(1024, device="cuda") for _ in range(100)]
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=100000)
    ys = [torch.empty(2048, device="cuda") for _ in range(100)]
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=100000)
    zs = [torch.empty(3072, device="cuda") for _ in range(100)]
    s = torch.cuda.memory._snapshot()
    ev = [e for e in s["device_traces"][0] if e["action"] == "alloc" and e["size"] in (4096, 8192, 12288)]
    by = {}
    for e in ev:
        k = by.setdefault(e["size"], [0, 0])
        k[0] += 1
        k[1] += 1 if e.get("frames") else 0
    out["rearm"] = {str(k): {"allocs": v[0], "with_frames": v[1]} for k, v in sorted(by.items())}
    del xs, ys, zs

    # Per-allocation cost of each recording mode, tight loop.
    def loop():
        for _ in range(20000):
            torch.empty(4096, device="cuda")
    costs = {}
    for name, kw in (("off", None), ("context None", dict(context=None)), ("context alloc", dict(context="alloc")),
                     ("context all", dict(context="all"))):
        torch.cuda.memory._record_memory_history(enabled=None)
        if kw:
            torch.cuda.memory._record_memory_history(enabled="all", stacks="python", max_entries=100000, **kw)
        t, _ = timed(loop, 3)
        costs[name] = t / 20000 * 1e6
    torch.cuda.memory._record_memory_history(enabled=None)
    out["us_per_alloc"] = costs
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
