"""Healthy: warm-up and eval passes. GPT-2 (4 layers); a bounded cache of
rotary-style tables fills over the first 150 steps (one 4 MiB table per new
key, 150 keys, then only hits: a growth that stops), optimizer state comes
at the first step, and every 100 steps an eval pass of 20 batches of 32 x 512
runs under no_grad, each eval batch recorded as a step (its peak is the
spike). 1,000 training steps, padded to 40 ms."""
import time

import torch

import levels

TABLES = {}


def table(key):
    if key not in TABLES:
        TABLES[key] = torch.zeros(1 << 20, device="cuda")
    return TABLES[key]


def evaluate(model, rec, n):
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(20):
            ids = torch.randint(0, model.config.vocab_size, (32, 512), device="cuda")
            model(input_ids=ids, labels=ids).loss.item()
            rec.step(n, ids.shape)
            n += 1
    model.train()
    return n


def main():
    rec = levels.Levels("eval_warmup")
    model = levels.gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    n = 0
    for step in range(1000):
        t = time.time()
        ids = torch.randint(0, model.config.vocab_size, (8, 256), device="cuda")
        tab = table(min(step, 149))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss + tab[0]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        rec.step(n, ids.shape)
        n += 1
        if step % 100 == 99:
            n = evaluate(model, rec, n)
        levels.pace(t, 0.04)
    rec.save("completed")


if __name__ == "__main__":
    main()
