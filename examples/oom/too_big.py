"""A model too big for its card: GPT-2 with 24 layers of width 1536 (~0.8 B
parameters) and AdamW under a 6 GiB cap runs out of memory in its first step."""
import torch

import common


def main():
    common.cap(6)
    model = common.gpt2(layers=24, embd=1536, heads=16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(3):
        ids = torch.randint(0, model.config.vocab_size, (4, 512), device="cuda")
        try:
            common.train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            return common.report(step, e, params=sum(p.numel() for p in model.parameters()))
    common.report(None, None)


if __name__ == "__main__":
    main()
