"""Snapshots of one training script at several batch sizes, for `vramscope whatif`.

Run on a CUDA machine: SNAPDIR=OUT python3 examples/record/record_whatif.py
Check a prediction:    SNAPDIR=OUT python3 examples/record/record_whatif.py --check 245,258,280
(runs those batch sizes unrecorded; each reports its peaks, or that it ran out
of memory; written to whatif_check.json)
Each batch size runs in its own process (a fresh caching allocator): two
steps of GPT-2 (6 layers, seq 512, bf16 autocast, AdamW). Sizes 2, 4 and 8 are
recorded (whatif_bs{N}.pickle); 12 and 16 are only measured, to check the
prediction for sizes it never saw. whatif.json holds what each run measured.
"""
import json
import os
import subprocess
import sys
import time

RECORDED = (2, 4, 8)
HELD_OUT = (12, 16)


def child(batch, record, out):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    if record:
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=40000)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (batch, 512), device="cuda")
    try:
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        print(json.dumps({"batch": batch, "oom": str(e).splitlines()[0][:200], "max_reserved": torch.cuda.max_memory_reserved(),
                          "total": torch.cuda.get_device_properties(0).total_memory}), flush=True)
        return
    rec = {"batch": batch, "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
           "total": torch.cuda.get_device_properties(0).total_memory}
    if record:
        path = os.path.join(out, f"whatif_bs{batch}.pickle")
        torch.cuda.memory._dump_snapshot(path)
        rec["snapshot"] = os.path.basename(path)
    print(json.dumps(rec), flush=True)


def main():
    out = os.environ.get("SNAPDIR", ".")
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2 and sys.argv[1] == "--check":
        runs = []
        for b in [int(x) for x in sys.argv[2].split(",")]:
            p = subprocess.run([sys.executable, __file__, str(b), "0"], capture_output=True, text=True)
            line = [l for l in p.stdout.splitlines() if l.startswith("{")]
            runs.append(json.loads(line[-1]) if line else {"batch": b, "error": p.stderr[-1000:]})
            print(json.dumps(runs[-1]), flush=True)
        with open(os.path.join(out, "whatif_check.json"), "w") as f:
            json.dump({"checked_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": runs}, f, indent=1)
        return
    if len(sys.argv) > 1:
        child(int(sys.argv[1]), sys.argv[2] == "1", out)
        return
    runs = []
    for b in RECORDED + HELD_OUT:
        p = subprocess.run([sys.executable, __file__, str(b), "1" if b in RECORDED else "0"], capture_output=True, text=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if not line:
            print(p.stderr[-2000:], file=sys.stderr)
            sys.exit(1)
        runs.append(json.loads(line[-1]))
        print(line[-1], flush=True)
    with open(os.path.join(out, "whatif.json"), "w") as f:
        json.dump({"recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "workload":
                   "GPT-2 6 layers, seq 512, bf16 autocast, AdamW, 2 steps per process", "recorded": list(RECORDED),
                   "held_out": list(HELD_OUT), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
