"""One rank of a two-rank torchrun launch that shares one GPU (no process
group: each rank trains its own GPT-2 copy, as data-parallel ranks hold the
same model). Rank 1 is made heavier on purpose: its batch is --heavy times
rank 0's, so its activations are larger (the line of the forward pass).

    vramscope run -- torchrun --standalone --nproc_per_node 2 rank_train.py --out DIR [--oom]

Each rank writes DIR/ready<RANK> (its pid) after --warm steps, then trains
until DIR/stop exists (at most --max-seconds). With --oom, rank 1 caps itself
at --cap-gib GiB (torch.cuda.set_per_process_memory_fraction) and doubles its
batch each step after DIR/go exists until it runs out of memory; the agent's
OOM observer hands the snapshot to the daemon, which captures rank 0 too.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oom")))  # frames then read examples/oom/common.py
import common  # noqa: E402  (gpt2, train_step: GPT-2 from a config, no download)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heavy", type=int, default=3, help="rank 1's batch is this many times rank 0's")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=240)
    ap.add_argument("--oom", action="store_true")
    ap.add_argument("--cap-gib", type=float, default=12)
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(0)  # both ranks on the one GPU
    if a.oom and rank == 1:
        common.cap(a.cap_gib)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = a.batch * (a.heavy if rank == 1 else 1)
    stop, go = os.path.join(a.out, "stop"), os.path.join(a.out, "go")
    end = time.time() + a.max_seconds
    step, grown = 0, False
    while time.time() < end and not os.path.exists(stop):
        if a.oom and rank == 1 and os.path.exists(go):
            batch, grown = batch * 2, True
        ids = torch.randint(0, model.config.vocab_size, (batch, a.seq), device="cuda")
        try:
            common.train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            common.report(step, e, rank=rank, batch=batch)
            return
        step += 1
        if step == a.warm:
            with open(os.path.join(a.out, f"ready{rank}"), "w") as f:
                f.write(str(os.getpid()))
        if grown:
            time.sleep(0.5)
    print(json.dumps({"rank": rank, "steps": step, "batch": batch,
                      "max_allocated": torch.cuda.max_memory_allocated()}), flush=True)


if __name__ == "__main__":
    main()
