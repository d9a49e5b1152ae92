"""Per-step memory levels, recorded by the program itself (the agent's
per-step ring is another branch's work): at each step's end allocated and
reserved, the step's peak (max_memory_allocated, reset per step), the time
since start and the input shape, written as JSON for profiler/forecast's
tests (profiler/forecast/testdata)."""
import json
import os
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def cap(gib):
    """Limit this process to gib GiB of the device; returns the cap in bytes."""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(gib * 2**30 / total)
    return int(gib * 2**30)


def gpt2(layers=4, embd=512, heads=8):
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, n_positions=1024)
    return GPT2LMHeadModel(cfg).cuda()


def pace(start, seconds):
    """Pads a step to `seconds` (a data loader's share of a real step)."""
    left = seconds - (time.time() - start)
    if left > 0:
        time.sleep(left)


class Levels:
    def __init__(self, name, cap_bytes=0):
        self.name = name
        self.cap = cap_bytes or torch.cuda.get_device_properties(0).total_memory
        self.t0 = time.time()
        self.steps = []
        torch.cuda.reset_peak_memory_stats()

    def step(self, step, shape):
        self.steps.append({"step": step, "t": round(time.time() - self.t0, 4),
                           "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                           "peak": torch.cuda.max_memory_allocated(), "shape": list(shape)})
        torch.cuda.reset_peak_memory_stats()

    def save(self, outcome, **extra):
        out = os.environ.get("OUT", ".")
        doc = {"program": self.name, "outcome": outcome, "cap_bytes": self.cap,
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "seconds": round(time.time() - self.t0, 3), **extra, "steps": self.steps}
        with open(os.path.join(out, self.name + ".json"), "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        print(self.name, outcome, len(self.steps), "steps", doc["seconds"], "s", extra, file=sys.stderr, flush=True)
