"""A class-attribute cache that grows: postable.PositionTable keeps one
64 MiB table per (length, scale), and a GPT-2 training loop asks for a new
scale every step, so under an 8 GiB cap it runs out of memory after ~90
steps. Only the class's dict holds the tables."""
import torch

import common
from postable import PositionTable


def main():
    common.cap(8)
    model = common.gpt2(layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(800):
        ids = torch.randint(0, model.config.vocab_size, (4, 256), device="cuda")
        try:
            table = PositionTable.get(2048, 1.0 + step / 1000)
            out = common.train_step(model, opt, ids)
            out.loss.item() + float(table[0, 0])
        except torch.OutOfMemoryError as e:
            return common.report(step, e, tables=len(PositionTable._tables))
    common.report(None, None)


if __name__ == "__main__":
    main()
