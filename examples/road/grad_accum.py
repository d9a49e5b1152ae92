"""Healthy: gradient accumulation. GPT-2 (4 layers), 4 micro-batches per
optimizer step, a level per micro-batch: gradients appear after the first
backward, optimizer state after the first step, and the peak saw-tooths
with the accumulation cycle. 1,200 micro-steps, padded to 40 ms."""
import time

import torch

import levels


def main():
    rec = levels.Levels("grad_accum")
    model = levels.gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(1200):
        t = time.time()
        ids = torch.randint(0, model.config.vocab_size, (8, 384), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss / 4
        loss.backward()
        if step % 4 == 3:
            opt.step()
            opt.zero_grad(set_to_none=True)
        loss.item()
        rec.step(step, ids.shape)
        levels.pace(t, 0.04)
    rec.save("completed")


if __name__ == "__main__":
    main()
