"""Slow growth until OOM: a GPT-2 (4 layers) training loop that keeps one
1 MiB tensor per step in a list (a metrics history kept on the GPU) under a
3 GiB cap, each step padded to 70 ms. On the H200 (2026-12-02) it ran out
at step 635, 47 s in (profiler/forecast/testdata/leak.json). With --varlen
the batches' lengths also vary (64-512 tokens); under the same 3 GiB cap a
512-token batch alone does not fit (it ran out at step 4), so that variant
needs a larger cap: `--varlen --cap 6 --leak-mib 4` (6 GiB, 4 MiB a step)."""
import random
import sys
import time

import torch

import levels


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    varlen = "--varlen" in sys.argv
    name = "leak_varlen" if varlen else "leak"
    cap = levels.cap(float(arg("--cap", 3)))
    leak = int(arg("--leak-mib", 1)) << 20
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
            kept.append(torch.empty(leak, dtype=torch.uint8, device="cuda").fill_(1))  # the leak
            loss.item()
        except torch.OutOfMemoryError:
            return rec.save("oom", oom_step=step, oom_t=round(time.time() - rec.t0, 3))
        rec.step(step, ids.shape)
        levels.pace(t, 0.07)
    rec.save("completed")


if __name__ == "__main__":
    main()
