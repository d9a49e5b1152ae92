"""Labelled GPU counter phases, for the counter classifier's tests.

Run on a CUDA machine beside the two recorders (see record_counters.sh):
    python3 examples/record/record_counters.py OUT/labels.json

Each phase runs for --seconds and is written to labels.json with its wall-clock
start and end (unix ms): idle, compute_bound (bf16 matmuls), memory_bandwidth_bound
(device-to-device copies), pcie_transfer (pinned host<->device copies),
offload_traffic (the same copies with device memory nearly full), input_starved
(memory held, a short kernel every 200 ms), idle again.
"""
import json
import sys
import time

import torch

SECONDS = 8.0


def now_ms():
    return int(time.time() * 1000)


def run(label, fn, labels, seconds=SECONDS):
    torch.cuda.synchronize()
    start = now_ms()
    end_at = time.time() + seconds
    while time.time() < end_at:
        fn()
    torch.cuda.synchronize()
    labels.append({"class": label, "start_ms": start, "end_ms": now_ms()})
    print(label, labels[-1], flush=True)


def main():
    out = sys.argv[1]
    labels = []
    start = now_ms()
    time.sleep(SECONDS)  # before CUDA is initialised: nothing on the GPU
    labels.append({"class": "idle", "start_ms": start, "end_ms": now_ms()})

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    run("compute_bound", lambda: torch.mm(a, b), labels)
    a = b = None  # freed (not del: the lambda above names them)

    src = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    run("memory_bandwidth_bound", lambda: dst.copy_(src), labels)
    src = dst = None

    host = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    dev = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")

    def pcie():
        dev.copy_(host, non_blocking=True)
        host.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()
    run("pcie_transfer", pcie, labels)

    free, total = torch.cuda.mem_get_info()
    ballast = torch.empty(int(free - 6 * (1 << 30)), dtype=torch.uint8, device="cuda")  # leave ~6 GiB
    run("offload_traffic", pcie, labels)
    del ballast

    held = torch.empty(20 << 30, dtype=torch.uint8, device="cuda")
    small = torch.randn(1024, 1024, device="cuda")

    def starved():
        for _ in range(5):
            small.mul_(1.0001)
        torch.cuda.synchronize()
        time.sleep(0.2)  # the input pipeline keeps the GPU waiting
    run("input_starved", starved, labels)
    del held
    small = host = dev = None
    torch.cuda.empty_cache()

    start = now_ms()
    time.sleep(SECONDS)
    labels.append({"class": "idle", "start_ms": start, "end_ms": now_ms(), "note": "CUDA context alive, nothing allocated"})
    with open(out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "total_bytes": total,
                   "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "phases": labels}, f, indent=1)


if __name__ == "__main__":
    main()
