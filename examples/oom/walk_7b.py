"""How long the agent's tensor walk (vramscope/agent/_tensors.py) takes with a
7B-parameter model's tensors alive: a Llama-2-7B-shaped model (random
weights, bf16) with AdamW state, in the middle of a forward pass whose graph
holds the saved activations. Prints one JSON line: the walk's time (median
of 3) and what it named; then the same with one CUDA tensor that nothing
Python can read holds (an itertools.repeat), so that the walk's second part
looks through every holder and every imported module's globals to the end:
its worst case.

    python3 examples/oom/walk_7b.py     (needs ~60 GB of GPU memory)
"""
import itertools
import json
import statistics
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from vramscope.agent import _tensors


def main():
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    built = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, cfg.vocab_size, (1, 512), device="cuda")
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()  # AdamW state for every parameter
    opt.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids)  # a graph with saved activations, as mid-step
    loss = out.loss  # noqa: F841  the root the walk finds on this frame
    figures = {"params": params, "build_s": round(built, 1), "modules_imported": len(sys.modules)}
    figures["walk"] = timed()
    hidden = itertools.repeat(torch.ones(1024, device="cuda"))  # noqa: F841  unreachable for the walk
    figures["walk_with_an_unreachable_tensor"] = timed()
    figures["allocated"] = torch.cuda.memory_allocated()
    print(json.dumps(figures), flush=True)


def timed():
    """Three walks: their times, the median, and what the last one named."""
    times, res = [], None
    for _ in range(3):
        t = time.perf_counter()
        res = _tensors.name_tensors(torch)
        times.append((time.perf_counter() - t) * 1000.0)
    kinds = {}
    for e in res["entries"]:
        kinds[e[3]] = kinds.get(e[3], 0) + e[2]
    return {"walk_ms": [round(x, 1) for x in times], "walk_ms_median": round(statistics.median(times), 1),
            "entries": len(res["entries"]), "objects": res["objects"], "truncated": res["truncated"],
            "routes": res["routes"], "named_bytes_by_kind": kinds}


if __name__ == "__main__":
    main()
