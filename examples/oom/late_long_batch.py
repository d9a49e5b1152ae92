"""A GPT-2 (6 layers) fine-tune under a 9 GiB cap: 39 steps of short
sequences, then one batch of long ones, between two recorded windows of the
agent's default sampling, runs out of memory."""
import torch

import common


def main():
    common.cap(9)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(60):
        long = step >= 39
        batch, seq = (16, 1024) if long else (8, 256)
        ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")
        try:
            common.train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            return common.report(step, e, batch=batch, seq=seq)
    common.report(None, None)


if __name__ == "__main__":
    main()
