"""The road to a late OOM on short steps (docs/road-to-oom.md, "Short
steps"): GPT-2 with 2 layers of 256 under a 4 GiB cap, 500 steps of batch
4 x 128 (about 8 ms each on the H200: sparse mode, the roots without a
pre-hook between reads), then one batch of 64 x 1024 that runs out of
memory in its forward. The failing step's inputs come from the stack (the
root's call frame). Run under `vramscope run`."""
import torch

import common


def main():
    common.cap(4)
    model = common.gpt2(layers=2, embd=256, heads=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    common.until_oom(model, opt, lambda step: (64, 1024) if step >= 500 else (4, 128), 520)


if __name__ == "__main__":
    main()
