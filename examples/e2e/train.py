"""GPT-2 124M training steps on random tokens (no download): the workload of
the GPU end-to-end check and of the agent-overhead benchmark.

python3 examples/e2e/train.py --steps 60 [--pause-at K --ready F --go F] [--time-snapshot]

With --pause-at K it writes its pid to F (--ready) after step K, waits until
the file --go exists (the driver takes its snapshot meanwhile), then, with
--time-snapshot, times torch.cuda.memory._snapshot() itself for comparison.
It prints one JSON line with the step times at the end.
"""
import argparse
import json
import os
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def build(layers=12):
    cfg = GPT2Config(n_layer=layers, n_embd=768, n_head=12, n_positions=1024)  # GPT-2 124M
    return GPT2LMHeadModel(cfg).cuda()


def step(model, opt, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


# What the agent measured of its own cost in each block it was attached
# (vramscope.status()["cost"], read just before each detach): cycle_stats.py
# divides it by the block's time.
AGENT_COST = []
_wrapper_seen = [0.0]


def note_cost(block):
    import vramscope
    st = vramscope.status()
    if not st.get("attached") or "cost" not in st:
        return
    c = st["cost"]
    wrapper = c["backward_wrapper_s"] - _wrapper_seen[0]  # cumulative over attaches
    _wrapper_seen[0] = c["backward_wrapper_s"]
    AGENT_COST.append({"block": block, "hook_s": c["hook_s"], "backward_wrapper_s": round(wrapper, 6),
                       "agent_threads_cpu_s": c["agent_threads_cpu_s"]})


def switch(mode, block=-1):
    """Detach the agent, or (re)attach it: "sampled" (its default: the first 3
    steps, then 2 of every 100), "continuous" (every step, context alloc), or a
    context name (all, alloc) recorded every step."""
    import vramscope
    note_cost(block - 1)
    vramscope.detach()
    os.environ.pop("VRAMSCOPE_ANNOTATIONS", None)
    if mode == "norecord":  # the agent's threads and hooks, no recording at all
        vramscope.attach(socket=os.environ.get("VRAMSCOPE_SOCKET"), record=False)
    elif mode != "off":
        if mode.endswith("_noann"):  # without record_function annotations
            os.environ["VRAMSCOPE_ANNOTATIONS"] = "0"
            mode = mode[:-len("_noann")]
        os.environ["VRAMSCOPE_CONTEXT"] = "alloc" if mode in ("sampled", "continuous") else mode
        vramscope.attach(max_entries=100000, socket=os.environ.get("VRAMSCOPE_SOCKET"),
                         sample=None if mode == "sampled" else "off")


def history_on():
    """Whether the allocator records its history now (torch's own flag)."""
    f = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    return bool(f()) if f is not None else False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--pause-at", type=int, default=-1)
    ap.add_argument("--ready", default="")
    ap.add_argument("--go", default="")
    ap.add_argument("--time-snapshot", action="store_true")
    ap.add_argument("--cycle", default="", help="same-run A/B: modes (off, sampled, continuous, alloc, all) cycled every --block steps via vramscope.detach()/attach()")
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--settle", type=int, default=1, help="steps not counted at the start of each --cycle block (attach costs)")
    ap.add_argument("--warmup", type=int, default=-1, help="steps not counted at the start (default: the first cycle)")
    ap.add_argument("--record", default="", help="record in-process: CONTEXT[,noann] e.g. all, alloc, alloc,noann")
    a = ap.parse_args()
    if a.record:
        context, _, rest = a.record.partition(",")
        kw = dict(enabled="all", context=context, stacks="python", max_entries=100000)
        if rest != "noann":
            kw["global_record_annotations"] = True
        torch.cuda.memory._record_memory_history(**kw)
    torch.manual_seed(0)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.seq), device="cuda")
    times, extra = [], {}
    modes = a.cycle.split(",") if a.cycle else []
    warmup = a.warmup if a.warmup >= 0 else a.block * len(modes)
    by_mode = {m: [] for m in modes}
    for i in range(a.steps):
        if modes and i % a.block == 0:
            switch(modes[(i // a.block) % len(modes)], i // a.block)
        torch.cuda.synchronize()
        recording = history_on() if modes else False
        if recording:
            extra.setdefault("recorded_steps", []).append(i)
        t = time.perf_counter()
        step(model, opt, ids)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        if modes and i % a.block >= a.settle and i >= warmup:  # skip the warm-up and each block's first steps
            mode = modes[(i // a.block) % len(modes)]
            by_mode[mode].append(time.perf_counter() - t)
            if mode.startswith("sampled"):  # its steps in and between recorded windows
                by_mode.setdefault(mode + (":recorded" if recording else ":between"), []).append(time.perf_counter() - t)
        if i == a.pause_at:
            if a.time_snapshot:
                # Warm torch's own _snapshot() up once, untimed: its first call
                # in a process is slower (the agent's capture comes first, so
                # without this torch's timed call would be the warm one).
                del_snap = torch.cuda.memory._snapshot()
                del del_snap
            with open(a.ready + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(a.ready + ".tmp", a.ready)
            if a.time_snapshot:
                # Interleaved with the driver's captures, in the same paused
                # state: it writes GO.K after its K-th capture, this times
                # torch's own _snapshot() and answers GO.K.done. The medians
                # are the figures (run to run either varies by a third).
                runs, snap, k = [], None, 0
                while not os.path.exists(a.go):
                    if os.path.exists("%s.%d" % (a.go, k)):
                        snap = None  # freeing the last one is not part of the timing
                        t = time.perf_counter()
                        snap = torch.cuda.memory._snapshot()
                        runs.append(time.perf_counter() - t)
                        with open("%s.%d.done" % (a.go, k), "w") as f:
                            f.write(str(runs[-1]))
                        k += 1
                    time.sleep(0.02)
                if not runs:
                    runs.append(0.0)
                    snap = torch.cuda.memory._snapshot()
                extra["torch_snapshot_runs_s"] = [round(x, 4) for x in runs]
                extra["torch_snapshot_s"] = statistics.median(runs)
                extra["entries"] = sum(len(tr) for tr in snap["device_traces"])
                # The agent's VSM1 encoding of the same snapshot into
                # /dev/null: what the capture adds before any wait on the daemon.
                try:
                    from vramscope.agent._vsm import write_vsm
                    with open(os.devnull, "wb", buffering=1 << 20) as f:
                        t = time.perf_counter()
                        write_vsm(snap, f, chunk_entries=8192)
                        extra["vsm_devnull_s"] = time.perf_counter() - t
                except ImportError:
                    pass
                del snap
            else:
                while not os.path.exists(a.go):
                    time.sleep(0.02)
    if modes:
        note_cost((a.steps - 1) // a.block)
        extra["agent_cost"] = AGENT_COST
        extra["cycle"] = {m: {"steps": len(v), "median_step_ms": 1000 * statistics.median(v),
                              "mean_step_ms": 1000 * statistics.fmean(v)} for m, v in by_mode.items() if v}
    warm = times[5:] if len(times) > 10 else times
    print(json.dumps({"pid": os.getpid(), "steps": len(times), "median_step_ms": 1000 * statistics.median(warm),
                      "step_ms": [round(1000 * x, 3) for x in times], "max_allocated": torch.cuda.max_memory_allocated(),
                      **extra}), flush=True)


if __name__ == "__main__":
    main()
