"""Slow growth until OOM: each step keeps its logits for "later analysis"
(a list that is never cleared), so memory climbs ~100 MB a step under an
8 GiB cap until a step cannot fit."""
import torch

import common


def main():
    common.cap(8)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    kept = []
    for step in range(400):
        ids = torch.randint(0, model.config.vocab_size, (4, 256), device="cuda")
        try:
            out = common.train_step(model, opt, ids)
            kept.append(out.logits.detach())
        except torch.OutOfMemoryError as e:
            return common.report(step, e, kept=len(kept))
    common.report(None, None)


if __name__ == "__main__":
    main()
