"""A late long batch: GPT-2 (4 layers) under a 4 GiB cap, 600 steps of
8 x 128 tokens, then one batch of 32 x 1024 runs out of memory. Memory was
flat before: no warning is expected (the jump is the report's to explain)."""
import time

import torch

import levels


def main():
    cap = levels.cap(4)
    rec = levels.Levels("late_long", cap)
    model = levels.gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(700):
        t = time.time()
        shape = (32, 1024) if step >= 600 else (8, 128)
        ids = torch.randint(0, model.config.vocab_size, shape, device="cuda")
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
        except torch.OutOfMemoryError:
            return rec.save("oom", oom_step=step, oom_t=round(time.time() - rec.t0, 3))
        rec.step(step, ids.shape)
        levels.pace(t, 0.04)
    rec.save("completed")


if __name__ == "__main__":
    main()
