"""One rank of a real data-parallel launch on two GPUs (issue #21): GPT-2
built from a transformers config (random weights, no download), wrapped in
DDP (NCCL) or sharded with FSDP2's fully_shard, one rank made heavier on
purpose (its batch is --heavy times the others'), optionally run out of
memory on one rank under a cap.

    vramscope run -- torchrun --standalone --nproc_per_node 2 rank_dist.py --out DIR --wrap ddp|fsdp [--oom]

Protocol with the driver (run_ranks.py --dist ddp|fsdp): each rank writes
DIR/ready<RANK> (its pid) after --warm steps and trains until DIR/stop
exists (checked by every rank at the same step, through an all-reduce, so
they leave together) or --max-seconds pass. With --oom, the heavy rank caps
itself at --cap-gib GiB and doubles its batch once DIR/go exists; its
OutOfMemoryError ends it, and the other rank then waits in its next
all-reduce until the driver stops the launch (the daemon captures it there).
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oom")))  # frames then read examples/oom/common.py
import common  # noqa: E402  (gpt2: GPT-2 from a config; cap)


def wrap(model, how):
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    from torch.distributed.fsdp import fully_shard  # FSDP2 (torch >= 2.6)

    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    return model


def stop_everywhere(path):
    """Whether any rank saw the stop file: every rank asks at the same step."""
    flag = torch.tensor([1.0 if os.path.exists(path) else 0.0], device="cuda")
    dist.all_reduce(flag)
    return flag.item() > 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--wrap", choices=["ddp", "fsdp"], default="ddp")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heavy", type=int, default=3)
    ap.add_argument("--heavy-rank", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=240)
    ap.add_argument("--oom", action="store_true")
    ap.add_argument("--cap-gib", type=float, default=20)
    a = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
    heavy = rank == a.heavy_rank
    if a.oom and heavy:
        common.cap(a.cap_gib)
    model = wrap(common.gpt2(layers=a.layers), a.wrap)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = 50257
    batch = a.batch * (a.heavy if heavy else 1)
    stop, go = os.path.join(a.out, "stop"), os.path.join(a.out, "go")
    end, step = time.time() + a.max_seconds, 0
    while time.time() < end and not stop_everywhere(stop):
        if a.oom and heavy and os.path.exists(go):
            batch *= 2
        ids = torch.randint(0, vocab, (batch, a.seq), device="cuda")
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        except torch.OutOfMemoryError as e:
            common.report(step, e, rank=rank, batch=batch)
            os._exit(3)  # leave the others waiting in their collective, as a real OOM does
        step += 1
        if step == a.warm:
            with open(os.path.join(a.out, f"ready{rank}"), "w") as f:
                f.write(str(os.getpid()))
    print(json.dumps({"rank": rank, "steps": step, "batch": batch, "wrap": a.wrap,
                      "max_allocated": torch.cuda.max_memory_allocated()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
