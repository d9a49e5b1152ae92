"""Runs a real trainer on CPU with vramscope's callback and prints, as JSON,
what the callback told the agent: every record_function scope entered and
exited, in order (the callback's and the trainer's own, such as
Optimizer.step#AdamW.step), each forward pass of the model (train or eval),
and the names the real profiler recorded. Run by test_trainers.py with the
torch interpreter (make setup's .venv-torch); the trainers print on stdout, so
the JSON goes to a file. Usage: trainer_cpu.py hf|lightning OUT.json
"""
import json
import sys
import tempfile

import torch

LOG = []


class LoggedScope(torch.autograd.profiler.record_function):
    """The real record_function, its entry and exit logged in order (the
    profiler's timestamps can tie between a marker and the scope after it)."""

    def __enter__(self):
        LOG.append(["enter", self.name])
        return super().__enter__()

    def __exit__(self, *exc):
        LOG.append(["exit", self.name])
        return super().__exit__(*exc)


torch.autograd.profiler.record_function = LoggedScope


def log_forward(module, inputs):
    LOG.append(["forward", "train" if module.training else "eval"])


def tiny_data(n):
    g = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(0, 64, (8,), generator=g)} for _ in range(n)]


def hf(out):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from vramscope.hf import VramscopeCallback

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    model.register_forward_pre_hook(log_forward)
    data = [dict(d, labels=d["input_ids"]) for d in tiny_data(12)]
    # 3 optimizer steps of 2 micro-batches of 2 rows; evaluation (2 batches) after step 2.
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                             max_steps=3, eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=2,
                             report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True,
                             disable_tqdm=True, dataloader_num_workers=0, seed=0)
    callback = VramscopeCallback()
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:4], callbacks=[callback])
    trainer.train()
    return callback


def lightning(out):
    try:
        import lightning as L
    except ImportError:  # the package before its rename
        import pytorch_lightning as L

    from vramscope.lightning import VramscopeCallback

    class Tiny(L.LightningModule):
        def _register_sharded_tensor_state_dict_hooks_if_available(self):
            # Lightning < 2.1 imports torch.distributed._shard here, which
            # torch 1.13 (Debian's) cannot on Python 3.11 (a dataclass with a
            # mutable default); the hooks only matter for sharded checkpoints.
            pass

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)
            self.layer.register_forward_pre_hook(log_forward)

        def training_step(self, batch, idx):
            return self.layer(batch["input_ids"].float()).pow(2).mean()

        def validation_step(self, batch, idx):
            self.layer(batch["input_ids"].float())

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(tiny_data(12), batch_size=2)
    callback = VramscopeCallback()
    # 3 optimizer steps of 2 micro-batches; validation (2 batches) after every 4 batches, none before training.
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=3, accumulate_grad_batches=2, val_check_interval=4,
                        limit_val_batches=2, num_sanity_val_steps=0, callbacks=[callback], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=out)
    trainer.fit(Tiny(), loader, torch.utils.data.DataLoader(tiny_data(4), batch_size=2))
    return callback


def main():
    trainer = {"hf": hf, "lightning": lightning}[sys.argv[1]]
    with tempfile.TemporaryDirectory() as out:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            callback = trainer(out)
    profiled = sorted({e.name for e in prof.events() if e.name.startswith("vramscope.")})
    with open(sys.argv[2], "w") as f:
        json.dump({"torch": torch.__version__, "log": LOG, "profiled": profiled,
                   "left_open": [n for n, _ in callback.phases._open], "off": callback.phases.off}, f)


if __name__ == "__main__":
    main()
