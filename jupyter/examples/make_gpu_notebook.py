#!/usr/bin/env python3
"""Writes jupyter/examples/gpu_cell.ipynb, the GPU notebook: %%vramscope around
a real training cell (a 12-layer transformer language model, AdamW, on CUDA),
the recording state restored, the user's own recording left alone, an out-of-
memory cell, %vramscope snapshot and live, and what the magic costs.
run_gpu_notebook.py executes it through nbclient on the GPU machine and keeps
the outputs. Rerun this only to change the cells (it drops any outputs)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

MD = """# `%%vramscope` on a GPU

Executed by `jupyter/examples/run_gpu_notebook.py` through nbclient in a real ipykernel on the GPU
machine (see jupyter/README.md, "GPU notebook"); the outputs below are that run's. Each report is two
outputs: its static copy (what GitHub and nbconvert show), then the anywidget view."""

CELLS = [
    # 1
    "%load_ext vramscope\n"
    "import json, time, torch\n"
    "import torch.nn.functional as F\n"
    "from torch import nn\n"
    "import vramscope.notebook as vn\n"
    "T = {}  # what each %%vramscope report cost\n"
    "torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)",
    # 2: the model and the training step, defined in a cell: their frames read "cell [2], line N"
    "class LM(nn.Module):\n"
    "    def __init__(self, vocab=32000, d=1024, layers=12, heads=16, seq=1024):\n"
    "        super().__init__()\n"
    "        self.emb = nn.Embedding(vocab, d)\n"
    "        self.pos = nn.Embedding(seq, d)\n"
    "        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True,\n"
    "                                           activation=\"gelu\")\n"
    "        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)\n"
    "        self.norm = nn.LayerNorm(d)\n"
    "        self.head = nn.Linear(d, vocab, bias=False)\n"
    "        self.register_buffer(\"mask\", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)\n"
    "\n"
    "    def forward(self, ids):\n"
    "        t = ids.size(1)\n"
    "        x = self.emb(ids) + self.pos(torch.arange(t, device=ids.device))\n"
    "        x = self.blocks(x, mask=self.mask[:t, :t], is_causal=True)\n"
    "        return self.head(self.norm(x))\n"
    "\n"
    "def build():\n"
    "    model = LM().cuda()\n"
    "    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)\n"
    "\n"
    "def batch(b=8, seq=1024):\n"
    "    return torch.randint(0, 32000, (b, seq + 1), device=\"cuda\")\n"
    "\n"
    "def step(model, opt, ids):\n"
    "    logits = model(ids[:, :-1])\n"
    "    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    opt.zero_grad(set_to_none=True)\n"
    "    return loss",
    # 3: the training cell
    "%%vramscope\n"
    "model, opt = build()\n"
    "for i in range(3):\n"
    "    loss = step(model, opt, batch())\n"
    "torch.cuda.synchronize()\n"
    "loss.item()",
    # 4
    "T['train'] = vn.last().timings\n"
    "assert not torch._C._cuda_isHistoryEnabled(), 'the recording %%vramscope started is stopped'\n"
    "T['train']",
    # 5: torch's own cost: the same three steps, recorded by hand, no magic
    "torch.cuda.synchronize()\n"
    "t = time.perf_counter()\n"
    "torch.cuda.memory._record_memory_history(max_entries=100_000, context='alloc', stacks='python')\n"
    "for i in range(3):\n"
    "    loss = step(model, opt, batch())\n"
    "torch.cuda.synchronize()\n"
    "torch.cuda.memory._record_memory_history(enabled=None)\n"
    "T['steps_recorded_by_hand_s'] = time.perf_counter() - t",
    # 6: the same steps under the magic
    "%%vramscope\n"
    "t = time.perf_counter()\n"
    "for i in range(3):\n"
    "    loss = step(model, opt, batch())\n"
    "torch.cuda.synchronize()\n"
    "T['steps_under_magic_s'] = time.perf_counter() - t",
    # 7
    "T['steps'] = vn.last().timings\n"
    "T['steps']",
    # 8: the user's own recording stays on
    "torch.cuda.memory._record_memory_history(max_entries=50_000)",
    # 9
    "%%vramscope --weight alloc\n"
    "loss = step(model, opt, batch())\n"
    "loss.item()",
    # 10
    "T['user_recording'] = vn.last().timings\n"
    "assert torch._C._cuda_isHistoryEnabled(), \"the user's recording is still on\"\n"
    "torch.cuda.memory._record_memory_history(enabled=None)",
    # 11: out of memory: the report of what the cell held, then the error as without the magic
    "%%vramscope\n"
    "huge = torch.empty(200 * 2**30, dtype=torch.uint8, device=\"cuda\")",
    # 12
    "%vramscope snapshot",
    # 13
    "%vramscope live --interval 0.5",
    # 14
    "time.sleep(4)\n"
    "lw = get_ipython().magics_manager.registry['VramscopeMagics'].live[0]\n"
    "lw.stop()\n"
    "T['live'] = {'samples': len(lw.samples), 'source': lw.source, 'last': lw.samples[-1] if lw.samples else None}\n"
    "T['live']",
    # 15
    "print('VRAMSCOPE_RESULTS ' + json.dumps(T))",
]


def main(path=None):
    path = path or os.path.join(HERE, "gpu_cell.ipynb")
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(MD)] + [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.cells[11].metadata["tags"] = ["raises-exception"]  # the out-of-memory cell
    for i, c in enumerate(nb.cells):
        c.id = "cell-%02d" % i
    nbformat.write(nb, path)
    print("wrote", path)


if __name__ == "__main__":
    main(*sys.argv[1:])
