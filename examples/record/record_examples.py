"""Records the example snapshots vramscope ships, on a CUDA machine.

Run: SNAPDIR=examples/snapshots python3 examples/record/record_examples.py
Each case writes NAME.pickle (torch.cuda.memory._dump_snapshot) and NAME.json
(what the run itself measured: torch.cuda.memory_stats peaks, timings, versions).
Weights are random; nothing is downloaded.
"""
import json
import os
import sys
import time

import torch

OUT = os.environ.get("SNAPDIR", "examples/snapshots")
CASES = sys.argv[1:] or ["example_train", "leak_steps", "expandable", "cuda_graph"]


def record(max_entries=100_000):
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=max_entries, global_record_annotations=True)


def finish(name, **extra):
    path = os.path.join(OUT, name + ".pickle")
    t = time.perf_counter()
    torch.cuda.memory._dump_snapshot(path)
    dump_s = time.perf_counter() - t
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    facts = {
        "name": name, "torch": torch.__version__, "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
        "allocated_now": torch.cuda.memory_allocated(), "reserved_now": torch.cuda.memory_reserved(),
        "num_ooms": stats.get("num_ooms", 0), "dump_seconds": dump_s, "snapshot_bytes": os.path.getsize(path),
        "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    facts.update(extra)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(facts, f, indent=1)
    print(json.dumps(facts), flush=True)


def reset():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def gpt2(layers=4, embd=512, heads=8):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, n_positions=512, vocab_size=32000)
    return GPT2LMHeadModel(cfg).cuda()


def example_train():
    """A small GPT-2 fine-tuning loop: bf16 autocast, AdamW, 3 steps."""
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    reset()
    record()
    times = []
    for step in range(3):
        ids = torch.randint(0, 32000, (8, 256), device="cuda")
        t = time.perf_counter()
        with torch.profiler.record_function(f"train_step_{step}"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    finish("example_train", steps=3, step_times=times, script="examples/record/record_examples.py:example_train")


def leak_steps():
    """A training loop that keeps every step's logits alive (a real leak)."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    kept = []
    reset()
    record()
    for _step in range(8):
        x = torch.randn(512, 1024, device="cuda")
        out = model(x)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        kept.append(out)  # keeps the graph's output (and its storage) alive across steps
    finish("leak_steps", steps=8, leaked_per_step=512 * 1024 * 4)


def expandable():
    """The same small loop with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."""
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters())
    reset()
    record()
    for step in range(3):
        x = torch.randn(256 * (step + 1), 2048, device="cuda")
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    finish("expandable", steps=3)
    torch.cuda.memory._set_allocator_settings("expandable_segments:False")


def cuda_graph():
    """A CUDA graph capture and replay: its memory lives in a private pool."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).cuda()
    x = torch.randn(64, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    reset()
    record()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    for _ in range(3):
        g.replay()
    z = model(x) * 2  # ordinary allocations beside the pool
    torch.cuda.synchronize()
    finish("cuda_graph", replays=3)
    del y, z


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for case in CASES:
        globals()[case]()
        reset()
