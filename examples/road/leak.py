"""Slow growth until OOM: a GPT-2 (4 layers) training loop that keeps one
tensor per step in a list (a metrics history kept on the GPU) under a memory
cap, each step padded to 70 ms. `leak.py` (1 MiB a step, 3 GiB cap) ran out
at step 635, 47 s in, on the H200; `--cap 4` (leak_4g) runs longer. With
--varlen the batches' lengths also vary (64-512 tokens), so the growth
hides under a noisy peak: `--varlen --cap 5 --mib 2` (leak_varlen)."""
import random
import sys
import time

import torch

import levels


def arg(flag, default):
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else default


def main():
    varlen = "--varlen" in sys.argv
    gib = int(arg("--cap", 3))
    mib = int(arg("--mib", 1))
    name = "leak_varlen" if varlen else ("leak" if gib == 3 else "leak_%dg" % gib)
    cap = levels.cap(gib)
    rec = levels.Levels(name, cap)
    model = levels.gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    kept = []
    rng = random.Random(1)
    for step in range(5000):
        t = time.time()
        seq = rng.choice([64, 128, 256, 512]) if varlen else 256
        ids = torch.randint(0, model.config.vocab_size, (8, seq), device="cuda")
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            kept.append(torch.empty(mib << 20, dtype=torch.uint8, device="cuda").fill_(1))  # the leak
            loss.item()
        except torch.OutOfMemoryError:
            return rec.save("oom", oom_step=step, oom_t=round(time.time() - rec.t0, 3))
        rec.step(step, ids.shape)
        levels.pace(t, 0.07)
    rec.save("completed")


if __name__ == "__main__":
    main()
