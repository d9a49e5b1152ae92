"""Checks on the GPU machine that the agent's sampling clock runs under real torch:
a program without optimizer steps gets its warm-up closed and clock windows."""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vramscope  # noqa: E402
from workloads import generate, gpt2  # noqa: E402

model = gpt2(layers=4)
vramscope.attach(sample="period_s=1,window_s=0.1,warmup_allocs=2000")
states, t0 = [], time.perf_counter()
while time.perf_counter() - t0 < 4:
    generate(model, batch=4, prompt_len=32, new=32)
    states.append(vramscope.status()["sampling"])
hist = torch._C._cuda_isHistoryEnabled() if hasattr(torch._C, "_cuda_isHistoryEnabled") else None
print(json.dumps({"last": states[-1], "recording_seen": sorted({s["recording_now"] for s in states}),
                  "history_enabled_now": hist, "cost": vramscope.status()["cost"]}))
vramscope.detach()
