"""The road to a late OOM (docs/road-to-oom.md): a small GPT-2 (2 layers,
256 wide) fine-tuned under a 3 GiB cap, 40 steps of batch 8 x 128 tokens
(an evaluation pass of 4 batches without gradients after step 20), then one
batch of 16 x 1024 that runs out of memory. Run under `vramscope run`: the
agent measures every step and hands the OOM snapshot over with the steps."""
import torch

import common


def main():
    common.cap(3)
    model = common.gpt2(layers=2, embd=256, heads=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(60):
        batch, seq = (16, 1024) if step >= 40 else (8, 128)
        if step == 20:
            with torch.no_grad():
                for _ in range(4):
                    model(input_ids=torch.randint(0, model.config.vocab_size, (16, 128), device="cuda"))
        ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")
        try:
            common.train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            return common.report(step, e, batch=batch, seq=seq,
                                 max_memory_allocated=torch.cuda.max_memory_allocated())
    common.report(None, None)


if __name__ == "__main__":
    main()
