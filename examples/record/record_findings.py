"""Records the snapshots the findings engine is tested on, on a CUDA machine.

Run: SNAPDIR=examples/snapshots/findings python3 examples/record/record_findings.py [CASE...]
Each case writes NAME.pickle (torch.cuda.memory._dump_snapshot; for an OOM, from the
OOM observer at the moment of the failure) and NAME.json (what the run itself measured:
torch.cuda.memory_stats, allocated bytes after every step, the OOM message, the cap).
Weights are random; nothing is downloaded. Small models, at most 50,000 trace entries.

Cases (what each one is, and what the diagnosis should say):
  leak_graph           training loop that keeps a validation loss *with its graph* every step   -> leak
  leak_infer           inference loop that keeps every output on the GPU (no optimizer, so no
                       Optimizer.step annotations: steps must come from periodicity)             -> leak
  frag_oom             a 1 GiB segment carved into blocks of varying sizes, every other freed,
                       then a 256 MiB request under a 1.25 GiB cap                               -> oom (fragmentation)
  frag_oom_expandable  the same, with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (its own process)
  cache_growth         a table cached per sequence length, lengths repeat after a while         -> cache_growth
  activation_oom       32-layer MLP, no checkpointing, the batch grows to 16k under a 3 GiB cap  -> oom (activation_peak)
  attn_oom             attention scores of a growing sequence under a 2 GiB cap                  -> oom (large_allocation)
  healthy_mlp          an ordinary AdamW loop                                                    -> no leak/fragmentation/oom
  cache_infer          inference loop with a causal mask cached per length (no optimizer)        -> cache_growth
  healthy_infer        inference loop that moves every output to the host (no optimizer)        -> nothing
"""
import json
import os
import subprocess
import sys
import time

import torch

OUT = os.environ.get("SNAPDIR", "examples/snapshots/findings")
CASES = ["leak_graph", "leak_infer", "frag_oom", "frag_oom_expandable", "cache_growth", "activation_oom",
         "attn_oom", "healthy_mlp", "cache_infer", "healthy_infer"]
MiB, GiB = 1 << 20, 1 << 30

_oom = {}  # the case that wants a snapshot when the allocator fails: name -> facts


def _on_oom(device, alloc, device_alloc, device_free):
    name = _oom.pop("name", None)
    if name:
        path = os.path.join(OUT, name + ".pickle")
        torch.cuda.memory._dump_snapshot(path)
        _oom["observer_args"] = [device, alloc, device_alloc, device_free]


def record():
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=50_000, global_record_annotations=True)


def reset(cap=None):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()  # num_ooms and retries per case, not per process
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(1.0 if cap is None else cap / total)


def finish(name, dumped=False, **extra):
    path = os.path.join(OUT, name + ".pickle")
    if not dumped:
        torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    facts = {
        "name": name, "torch": torch.__version__, "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0), "device_total": torch.cuda.get_device_properties(0).total_memory,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
        "allocated_now": torch.cuda.memory_allocated(), "reserved_now": torch.cuda.memory_reserved(),
        "num_ooms": stats.get("num_ooms", 0), "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "snapshot_bytes": os.path.getsize(path), "dumped_by_oom_observer": dumped,
        "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "script": "examples/record/record_findings.py:" + name,
    }
    facts.update(extra)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(facts, f, indent=1)
    print(json.dumps({k: v for k, v in facts.items() if k != "oom_message"}), flush=True)


def mlp(width=1024, hidden=4096, blocks=3):
    layers = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(width, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, width)]
    return torch.nn.Sequential(*layers).cuda()


def leak_graph():
    """Keeps each step's validation loss with its autograd graph: the saved activations pile up."""
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    val_losses = []
    reset()
    record()
    after = []
    for _step in range(10):
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        val = model(torch.randn(64, 1024, device="cuda")).pow(2).mean()
        val_losses.append(val)  # the bug: keeps val's graph (and its saved tensors) alive
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    finish("leak_graph", steps=10, allocated_after_step=after, leak_line="record_findings.py:val_losses")


def leak_infer():
    """An inference loop that keeps every prediction on the GPU."""
    model = mlp().eval()
    preds = []
    reset()
    record()
    after = []
    with torch.no_grad():
        for _step in range(12):
            x = torch.randn(128, 1024, device="cuda")
            y = model(x)
            preds.append(y)  # the bug: should be y.cpu() or y.item()
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
    finish("leak_infer", steps=12, allocated_after_step=after, leaked_per_step=128 * 1024 * 4)

def frag_oom():  # holes of varying sizes in one segment: plenty cached, no piece large enough
    name, cap = os.environ.get("CASE_NAME", "frag_oom"), 1280 * MiB
    reset(cap)
    record()
    big = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    del big  # one 1 GiB segment, cached
    sizes = [20, 28, 36, 44, 52]
    blocks, total, i = [], 0, 0
    while total + sizes[i % len(sizes)] <= 1000:
        blocks.append(torch.empty(sizes[i % len(sizes)] * MiB, dtype=torch.uint8, device="cuda"))
        total += sizes[i % len(sizes)]
        i += 1
    for j in range(0, len(blocks), 2):
        blocks[j] = None  # every other block freed: holes of 20-52 MiB
    _oom["name"] = name
    message = None
    try:
        want = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
        del want
    except torch.OutOfMemoryError as e:
        message = str(e)
    dumped = "name" not in _oom
    _oom.pop("name", None)
    finish(name, dumped=dumped, limit_bytes=cap, requested=256 * MiB, oom_message=message,
           observer_args=_oom.pop("observer_args", None), carved_blocks=len(blocks), carved_mib=total)
    del blocks


def cache_growth():
    """A table cached per sequence length: new lengths keep coming, then repeat."""
    model = mlp(blocks=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tables = {}
    schedule = [256, 512, 384, 768, 512, 1024, 256, 640, 896, 384, 1152, 512, 640, 256, 896, 768,
                512, 1024, 384, 640, 1152, 256, 768, 896]
    reset()
    record()
    after = []
    for _step, length in enumerate(schedule):
        if length not in tables:
            tables[length] = torch.randn(length, 1024, device="cuda")  # cached per length, never evicted
        x = torch.randn(length, 1024, device="cuda") + tables[length]
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    finish("cache_growth", steps=len(schedule), schedule=schedule, allocated_after_step=after,
           distinct_lengths=len(tables), cache_bytes=sum(t.numel() * 4 for t in tables.values()))


def activation_oom():
    """A deep MLP without checkpointing: the forward pass's saved activations fill the cap."""
    cap = 3 * GiB
    layers = []
    for _ in range(32):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    reset(cap)
    record()
    message, failed = None, None
    for step, batch in enumerate([1024, 1024, 16384]):
        if batch > 1024:
            _oom["name"] = "activation_oom"
        try:
            x = torch.randn(batch, 1024, device="cuda")
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        except torch.OutOfMemoryError as e:
            message, failed = str(e), step
            break
    dumped = "name" not in _oom
    _oom.pop("name", None)
    finish("activation_oom", dumped=dumped, limit_bytes=cap, failed_at_step=failed, oom_message=message,
           observer_args=_oom.pop("observer_args", None), layers=32, batch_sizes=[1024, 1024, 16384])


class Attention(torch.nn.Module):
    def __init__(self, width=1024, heads=8):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x):
        b, n, w = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q / (w // self.heads) ** 0.5) @ k.transpose(-2, -1)  # b x heads x n x n
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, w))


def attn_oom():
    """Naive attention: the score matrix grows with the square of the sequence length."""
    cap = 2 * GiB
    model = Attention().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    reset(cap)
    record()
    message, failed = None, None
    for step, n in enumerate([1024, 2048, 8192]):
        if n == 8192:
            _oom["name"] = "attn_oom"
        try:
            x = torch.randn(2, n, 1024, device="cuda")
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        except torch.OutOfMemoryError as e:
            message, failed = str(e), step
            break
    dumped = "name" not in _oom
    _oom.pop("name", None)
    finish("attn_oom", dumped=dumped, limit_bytes=cap, failed_at_step=failed, oom_message=message,
           observer_args=_oom.pop("observer_args", None), seq_lengths=[1024, 2048, 8192],
           scores_bytes_at_8192=2 * 8 * 8192 * 8192 * 4)


# The snapshots' frames point at these lines. frag_oom, cache_growth, activation_oom and attn_oom
# were recorded first (frag_oom_expandable's frames in frag_oom are 3 lines further down); the
# layout above and below is that of the second run, which recorded the other cases.
def healthy_mlp():
    """An ordinary training loop: AdamW, set_to_none, nothing kept."""
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    reset()
    record()
    after = []
    for _step in range(6):
        x = torch.randn(512, 1024, device="cuda")
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    finish("healthy_mlp", steps=6, allocated_after_step=after)


def cache_infer():
    """Inference with a causal mask cached per sequence length (an L x L table per new length)."""
    model = mlp(blocks=2).eval()
    masks = {}
    schedule = [512, 768, 640, 1024, 512, 896, 768, 1152, 640, 1024, 512, 896, 1152, 768, 640, 1024, 512, 896]
    reset()
    record()
    after = []
    with torch.no_grad():
        for _step, length in enumerate(schedule):
            if length not in masks:
                masks[length] = torch.ones(length, length, device="cuda").tril()  # kept for every length
            x = masks[length] @ torch.randn(length, 1024, device="cuda") / length
            model(x).sum().item()
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
    finish("cache_infer", steps=len(schedule), schedule=schedule, allocated_after_step=after,
           distinct_lengths=len(masks), cache_bytes=sum(m.numel() * 4 for m in masks.values()))


def healthy_infer():
    """Inference that keeps its results on the host."""
    model = mlp().eval()
    preds = []
    reset()
    record()
    after = []
    with torch.no_grad():
        for _step in range(12):
            x = torch.randn(128, 1024, device="cuda")
            preds.append(model(x).cpu())
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
    finish("healthy_infer", steps=12, allocated_after_step=after)


def frag_oom_expandable():
    """frag_oom in its own process: the allocator reads PYTORCH_CUDA_ALLOC_CONF at CUDA init."""
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True", CASE_NAME="frag_oom_expandable",
               SNAPDIR=OUT)
    subprocess.run([sys.executable, os.path.abspath(__file__), "frag_oom"], env=env, check=True)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    torch._C._cuda_attach_out_of_memory_observer(_on_oom)
    for case in sys.argv[1:] or CASES:
        t = time.perf_counter()
        try:
            globals()[case]()
        except Exception as e:  # one broken case must not cost the others
            print(f"{case}: FAILED {type(e).__name__}: {e}", flush=True)
            torch.cuda.memory._record_memory_history(enabled=None)
        print(f"{case}: {time.perf_counter() - t:.1f}s", flush=True)
        reset()
