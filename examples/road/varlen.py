"""Healthy: variable-length batches. GPT-2 (4 layers), each batch's length
drawn from a long-tailed mix (most 64-256 tokens, some up to 1024, the
longest ones late), so the step peak jumps around and the caching allocator
reserves more as longer batches first arrive. 1,200 steps, padded to 40 ms."""
import random

import time

import torch

import levels


def length(rng, step):
    r = rng.random()
    if r < 0.7:
        return rng.randint(64, 256)
    if r < 0.95:
        return rng.randint(256, 512)
    return rng.randint(512, 1024 if step > 600 else 768)


def main():
    rec = levels.Levels("varlen")
    model = levels.gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(2)
    for step in range(1200):
        t = time.time()
        ids = torch.randint(0, model.config.vocab_size, (8, length(rng, step)), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        rec.step(step, ids.shape)
        levels.pace(t, 0.04)
    rec.save("completed")


if __name__ == "__main__":
    main()
