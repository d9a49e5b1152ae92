"""The trainer callbacks with the real libraries on a tiny model built from a
config (no network): a transformers Trainer (GPT-2, 2 layers) and, when
installed, a Lightning Trainer, each for 4 optimizer steps of 2 accumulated
micro-batches with an evaluation, while the agent's recording runs with
annotations. Prints what the engine reads back: the trainer's markers and the
steps. Usage: python trainers.py OUTDIR VRAMSCOPE_BIN"""
import collections
import json
import os
import pickle
import subprocess
import sys

import torch

from vramscope.agent import _torch

out, engine = sys.argv[1], sys.argv[2]


def read_back(name):
    snap = torch.cuda.memory._snapshot()
    _torch.stop_recording(torch)
    path = os.path.join(out, name + ".pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    res = json.loads(subprocess.run([engine, "analyze", "--json", path], check=True, capture_output=True).stdout)
    dev = max(res["devices"], key=lambda d: d["peak"]["bytes"])
    starts = [m["name"] for m in dev["timeline"]["markers"] if m["kind"] == "start"]
    ours = collections.Counter(n if not n[-1].isdigit() and "done" not in n else n.rsplit(" ", 1)[0] + " N"
                               for n in starts if n.startswith("vramscope."))
    summary = {"trainer": name, "annotations": res["annotations"], "steps": len(res["steps"]),
               "step_source": res["step_source"], "vramscope_markers": dict(ours),
               "first_markers": [n for n in starts if n.startswith("vramscope.")][:12],
               "phase_sites": [s["function"] for s in res["sites"] if s["kind"] == "phase"][:8]}
    print(json.dumps(summary, indent=1))
    return summary


def hf():
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from vramscope.hf import VramscopeCallback

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128))
    data = [{"input_ids": torch.randint(0, 1000, (64,)), "labels": torch.randint(0, 1000, (64,))} for _ in range(32)]
    args = TrainingArguments(output_dir=os.path.join(out, "hf"), per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, max_steps=4, eval_strategy="steps", eval_steps=2,
                             per_device_eval_batch_size=4, report_to=[], save_strategy="no", logging_steps=1)
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:8], callbacks=[VramscopeCallback()])
    torch.cuda.init()
    _torch.start_recording(torch, 200000, "python", clear=True)
    trainer.train()
    return read_back("hf")


def lightning():
    try:
        import lightning as L
    except ImportError:
        try:
            import pytorch_lightning as L
        except ImportError:
            print(json.dumps({"trainer": "lightning", "skipped": "neither lightning nor pytorch_lightning is installed"}))
            return None
    from vramscope.lightning import VramscopeCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))

        def training_step(self, batch, i):
            return self.net(batch[0]).pow(2).mean()

        def validation_step(self, batch, i):
            self.log("v", self.net(batch[0]).pow(2).mean())

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())

    ds = torch.utils.data.TensorDataset(torch.randn(64, 256))
    dl = torch.utils.data.DataLoader(ds, batch_size=8)
    t = L.Trainer(max_steps=4, accumulate_grad_batches=2, val_check_interval=4, limit_val_batches=2, logger=False,
                  enable_checkpointing=False, enable_progress_bar=False, callbacks=[VramscopeCallback()],
                  accelerator="gpu", devices=1)
    torch.cuda.init()
    _torch.start_recording(torch, 200000, "python", clear=True)
    t.fit(Tiny(), dl, dl)
    return read_back("lightning")


results = [hf(), lightning()]
with open(os.path.join(out, "trainers.json"), "w") as f:
    json.dump(results, f, indent=1)
