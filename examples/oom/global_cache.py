"""A cache in an imported helper's global dict that grows every step: the
attention-bias helper (maskcache.py) keeps one 128 MiB tensor per (heads,
length, offset), and the offset changes each step, so under an 8 GiB cap a
GPT-2 training loop runs out of memory after ~45 steps. Nothing but the
helper's module dict holds the biases."""
import torch

import common
import maskcache


def main():
    common.cap(8)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(400):
        ids = torch.randint(0, model.config.vocab_size, (4, 256), device="cuda")
        try:
            b = maskcache.bias(16, 512, 4096 + step)
            out = common.train_step(model, opt, ids)
            out.loss.item() + float(b[0, 0, 0])
        except torch.OutOfMemoryError as e:
            return common.report(step, e, cached=len(maskcache._CACHE))
    common.report(None, None)


if __name__ == "__main__":
    main()
