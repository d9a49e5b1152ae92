"""A GPT-2 (6 layers) fine-tune under a 9 GiB cap: 39 steps of short
sequences, then one batch of long ones, between two recorded windows of the
agent's default sampling, runs out of memory."""
import torch

import common


def main():
    common.cap(9)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    common.until_oom(model, opt, lambda step: (16, 1024) if step >= 39 else (8, 256), 60)


if __name__ == "__main__":
    main()
