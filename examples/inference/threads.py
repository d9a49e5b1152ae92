"""Where the agent's own threads spend their CPU in an inference program
(issue #27), on a CUDA machine, under `vramscope run`:

    vramscope run -- python3 examples/inference/threads.py --workload generate32 --seconds 40

Every 5 s it reads each agent thread's CPU seconds (the link, the capture
worker, the sampling clock, the stack sampler; the run of 2026-12-03 had no
stack sampler column) and the schedule's state, and prints one JSON
line at the end: the per-thread CPU over each interval, so the warm-up's
share and the steady rate are apart.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS  # noqa: E402


def threads():
    from vramscope.agent import _agent

    a = _agent._agent
    if a is None:
        return None
    out = {("stacks" if k == "sampler" else k): _agent._thread_cpu_s(t) for k, t in a.threads().items()}
    out["sampling"] = a.recording.status().get("sampling")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--every", type=float, default=5.0)
    a = ap.parse_args()
    build, fn = WORKLOADS[a.workload]
    model = build()
    t0 = time.perf_counter()
    marks, i, nxt = [(0.0, threads(), 0)], 0, a.every
    while time.perf_counter() - t0 < a.seconds:
        fn(model, i)
        torch.cuda.synchronize()
        i += 1
        if time.perf_counter() - t0 >= nxt:
            marks.append((time.perf_counter() - t0, threads(), i))
            nxt += a.every
    rows = []
    for (ta, xa, ia), (tb, xb, ib) in zip(marks, marks[1:]):
        if not xa or not xb:
            continue
        row = {"from_s": round(ta, 2), "to_s": round(tb, 2), "calls": ib - ia}
        for k in ("link", "worker", "clock", "stacks"):
            row[k + "_cpu_share"] = round((xb[k] - xa[k]) / (tb - ta), 6)
        sb = xb.get("sampling") or {}
        row["recording_now"], row["windows"] = sb.get("recording_now"), sb.get("windows")
        row["recorded_s"] = sb.get("recorded_s")
        rows.append(row)
    print(json.dumps({"workload": a.workload, "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                      "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "intervals": rows,
                      "cost": __import__("vramscope").status().get("cost")}), flush=True)


if __name__ == "__main__":
    main()
