"""Shared parts of the OOM programs: a memory cap, GPT-2 built from a config
(random weights, no download), one training step, and the JSON line each
program prints when the error came (run them under `vramscope run`; the
agent's OOM observer hands the snapshot to the daemon)."""
import json
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def cap(gib):
    """Limit this process to gib GiB of the device, as a smaller card would."""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(gib * 2**30 / total)


def gpt2(layers=6, embd=768, heads=12):
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, n_positions=1024)
    return GPT2LMHeadModel(cfg).cuda()


def train_step(model, opt, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return out


def until_oom(model, opt, shape_at, steps):
    """Training steps of random token batches of shape_at(step) (batch, seq)
    until one runs out of memory; report() what happened."""
    for step in range(steps):
        batch, seq = shape_at(step)
        ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")
        try:
            train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            return report(step, e, batch=batch, seq=seq)
    return report(None, None)


def estimates(lv):
    """The levels budget's estimates (Levels, seconds): a step's hooks but the
    roots' pre-hooks and reads (other), the pre-hooks' (pre), a read's (extra)
    and the hooks all, each step (base); None before the budget ran; and the
    steps the optimizer hook's fast path took (fast_n, untimed: Levels.step_hook)."""
    return {k: getattr(lv, k, None) for k in ("other", "pre", "extra", "base", "fast_n")}


def steps(lv):
    """Steps a Levels has seen end, those its fast path holds too (an earlier
    version's: its step count)."""
    return getattr(lv, "steps_ended", lv.step)


def report(step, err, **extra):
    """After the OutOfMemoryError: give the agent's thread time to hand the
    snapshot over, then print what happened as one JSON line."""
    time.sleep(6)
    print(json.dumps(dict(oom_step=step, message=str(err).splitlines()[0] if err else None, **extra)), flush=True)
