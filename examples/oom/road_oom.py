"""The road to a late OOM (docs/road-to-oom.md): GPT-2 (6 layers) fine-tuned
under an 8 GiB cap, 60 steps of batch 8 x 256 tokens (an evaluation pass of
4 batches without gradients after step 30), then one batch of 16 x 1024 that
runs out of memory. Run under `vramscope run`: the agent measures every step
and hands the OOM snapshot over with the steps."""
import torch

import common


def main():
    common.cap(8)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(80):
        batch, seq = (16, 1024) if step >= 60 else (8, 256)
        if step == 30:
            with torch.no_grad():
                for _ in range(4):
                    model(input_ids=torch.randint(0, model.config.vocab_size, (16, 256), device="cuda"))
        ids = torch.randint(0, model.config.vocab_size, (batch, seq), device="cuda")
        try:
            common.train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            return common.report(step, e, batch=batch, seq=seq,
                                 max_memory_allocated=torch.cuda.max_memory_allocated())
    common.report(None, None)


if __name__ == "__main__":
    main()
