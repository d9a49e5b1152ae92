"""Grows the batch of a GPT-2 training step under a 6 GiB cap until CUDA runs
out of memory; run under `vramscope run`, the agent's OOM observer captures a
snapshot before the exception unwinds. Catches the error, waits for the agent
to hand the snapshot over, and exits 0.
"""
import json
import time

import torch

from train import build, step

LIMIT = 6 << 30


def main():
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(LIMIT / total)
    model = build(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    failed = None
    for batch in (2, 4, 8, 16, 32, 64, 128):
        ids = torch.randint(0, model.config.vocab_size, (batch, 1024), device="cuda")
        try:
            step(model, opt, ids)  # the OOM line
        except torch.OutOfMemoryError as e:
            failed = {"batch": batch, "message": str(e).splitlines()[0]}
            break
    time.sleep(8)  # the agent pickles and hands over on its own thread
    print(json.dumps({"oom": failed}), flush=True)


if __name__ == "__main__":
    main()
