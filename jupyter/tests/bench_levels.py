"""What the agent's per-step levels (vramscope.agent._levels) cost a training
step on the CPU (a benchmark, not a test: it prints figures and asserts
nothing). A proxy for examples/oom/road_cost.py, which measures the same on
the GPU: real torch, real module and optimizer steps, so the hooks run with
the caches as a step leaves them; but a fake allocator reader (the real one
needs CUDA) that builds a dict shaped like torch._C._cuda_memoryStats'
answer, and the optimizer's step hook called by the loop (torch < 2.0 has no
global one; nor with_kwargs pre-hooks: pass the inputs positionally).

    .venv-torch/bin/python jupyter/tests/bench_levels.py [--model gpt2|mlp] \
        [--other OLD_levels.py] [--full] [--cold N]

One process, one thread of torch: WARMUP steps, then BLOCKS blocks of BLOCK
steps with the levels on and off in turn (ABBA; with --other, a second
version of _levels.py gets blocks of its own: ABCCBA), each "on" block
starting the levels anew (root discovery, first strides, post-hooks for
QUIET_STEPS steps) and its first SETTLE steps not counted. A thread drains
the levels every LEVELS_EVERY seconds as the agent's link does. --full
starts each block with RING steps already kept. Prints one JSON line: per
version, the median step, the per-round differences to the "off" blocks
(noise of tens of microseconds: the agent's own measure is what resolves a
few), the agent's own measure of its time per step (Levels.cost_s over the
counted steps), the share of steps read, and the same hooks' cost in a loop
without the model (warm caches). --cold N measures without the agent's
clock instead (cold()): what the hooks add to an iteration that evicts the
caches, all of it, beside what cost_s says of the same."""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch  # noqa: E402

from vramscope.agent import _levels  # noqa: E402

_KEYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
         "active_bytes", "inactive_split_bytes", "requested_bytes")


class FakeReader:
    """Reader's read(): a dict shaped like _cuda_memoryStats' built and read, the peak reset."""
    index = 0

    def __init__(self):
        self.reads = 0
        self.n = 0

    def read(self):
        self.n += 1
        n = self.n
        s = {k: {p: {"current": n, "peak": n, "allocated": n, "freed": 0} for p in ("all", "small_pool", "large_pool")}
             for k in _KEYS}
        s.update(num_alloc_retries=0, num_ooms=0, max_split_size=-1, num_sync_all_streams=0,
                 num_device_alloc=0, num_device_free=0, oversize_allocations={"current": 0},
                 oversize_segments={"current": 0})
        ab, rb = s["allocated_bytes"]["all"], s["reserved_bytes"]["all"]
        self.reads += 1
        return ab["current"], rb["current"], ab["peak"], rb["peak"]


class Hook:
    """register_step_hook for torch without torch.optim's global hook: the loop calls it."""

    def __init__(self):
        self.fn = None

    def __call__(self, _torch, fn, direct=False):
        self.fn = fn
        return self

    def remove(self):
        self.fn = None


def model_of(kind):
    if kind == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=256)
        model = GPT2LMHeadModel(cfg)
        ids = torch.randint(0, cfg.vocab_size, (2, 16))

        def forward():
            return model(ids, labels=ids).loss
    else:
        layers = []
        for _ in range(6):
            layers += [torch.nn.Linear(128, 128), torch.nn.GELU(), torch.nn.LayerNorm(128)]
        model, lossf = torch.nn.Sequential(*layers), torch.nn.MSELoss()  # two roots a step
        x, y = torch.randn(48, 128), torch.randn(48, 128)

        def forward():
            return lossf(model(x), y)
    return model, forward


def fill(lv, ring):
    """A run's worth of steps already kept, as each version keeps them, all sent."""
    q = getattr(lv, "kept", lv.ring)  # this version moves them to `kept`; an earlier one kept them in `ring`
    for i in range(-ring, 0):
        q.append((i, 1700000000000 + i, 6000, -1, -1, -1, ((2, 16),), "train", False, False))


def load_other(path):
    """Another _levels.py (an earlier version, say) as a module of the agent's package."""
    spec = importlib.util.spec_from_file_location("vramscope.agent._levels_other", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cold(mods, n, mb):
    """Without the model and without the agent's clock: iterations that sweep
    a buffer of mb MiB and walk a list of dicts (the caches a step leaves)
    around each hook of a training step (root pre-hook, post-hook while
    there, optimizer step), with each version's hooks or none, in shuffled
    order; the difference of the mean iterations is what the hooks add, all
    of it (their calls, the misses they cause after them), beside cost_s."""
    import random
    buf, copy = bytearray(mb << 20), bytearray(mb << 20)
    junk = [{"k%d" % i: i} for i in range(20000)]
    x, model = torch.zeros(2, 16), torch.nn.Linear(16, 16)

    def thrash():
        copy[:] = buf
        for d in junk[::7]:
            len(d)

    lvs = {}
    for name, mod in mods.items():
        lv = mod.Levels(reader=FakeReader(), grad_enabled=torch.is_grad_enabled)
        if hasattr(lv, "posted"):
            lv.posts = lambda on: None  # as Roots.set_posts does
        for _ in range(40):  # past the start: strides set, post-hooks gone
            lv.root_pre(model, (x,), {})
            if getattr(lv, "posted", True):
                lv.root_post(model, (x,), None)
            lv.on_optimizer_step(None, (), {})
        lvs[name] = lv
    keys = list(lvs) + ["off"]
    tot = {k: [] for k in keys}
    c0 = {k: (lv.cost_s, lv.step) for k, lv in lvs.items()}
    rnd = random.Random(1)
    pc = time.perf_counter
    for _ in range(n):
        order = keys[:]
        rnd.shuffle(order)
        for k in order:
            lv = lvs.get(k)
            t = pc()
            thrash()
            if lv:
                lv.root_pre(model, (x,), {})
            thrash()
            if lv and getattr(lv, "posted", True):
                lv.root_post(model, (x,), None)
            thrash()
            if lv:
                lv.on_optimizer_step(None, (), {})
            tot[k].append(pc() - t)
    out = {"iteration_s": statistics.mean(tot["off"]), "mib": mb, "pairs": n}
    for k, lv in lvs.items():
        d = [a - b for a, b in zip(tot[k], tot["off"])]
        out[k] = {"added_s": statistics.mean(d), "added_se_s": statistics.stdev(d) / len(d) ** 0.5,
                  "own_s_per_step": (lv.cost_s - c0[k][0]) / (lv.step - c0[k][1])}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2", choices=("gpt2", "mlp"))
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--block", type=int, default=60)
    ap.add_argument("--settle", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--other", help="another _levels.py, run in blocks of its own beside this one's")
    ap.add_argument("--full", action="store_true", help="start each block with the ring of kept steps full")
    ap.add_argument("--cold", type=int, metavar="N", help="no model: N rounds of the clock-free measure (cold())")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model, forward = model_of(a.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    hook = Hook()
    mods = {"on": _levels}
    if a.other:
        mods["other"] = load_other(a.other)
    if a.cold:
        print(json.dumps({"torch": torch.__version__, "python": sys.version.split()[0], "cold": cold(mods, a.cold, 4)}))
        return
    cur = {"sl": None}  # the StepLevels of the block under way
    reader = FakeReader()
    stop = threading.Event()
    lock = threading.Lock()

    def link():  # the agent's link thread: drain every LEVELS_EVERY, the JSON it would send
        while not stop.wait(_levels.LEVELS_EVERY):
            with lock:
                sl = cur["sl"]
                for _ in range(8):
                    p = sl.params(_levels.SEND_MAX) if sl is not None else None
                    if p is None:
                        break
                    json.dumps(p, separators=(",", ":"))

    def step():
        t = time.perf_counter()
        forward().backward()
        opt.step()
        if hook.fn is not None:
            hook.fn(opt, (), {})
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t

    def levels(mode):
        sl = cur["sl"]
        if sl is not None:
            sl.stop()
            with lock:
                cur["sl"] = None
        if mode == "off":
            return None
        sl = mods[mode].StepLevels()
        rec = [False] if hasattr(mods[mode], "_Cell") else (lambda: False)  # the agent's: a cell, or earlier a function
        sl.start(torch, rec, lambda: None, hook)
        sl.levels.reader = reader
        if a.full:
            fill(sl.levels, mods[mode].RING)
        with lock:
            cur["sl"] = sl
        return sl.levels

    threading.Thread(target=link, daemon=True).start()
    for _ in range(a.warmup):
        step()
    modes = list(mods) + ["off"]
    order = modes + modes[::-1]  # ABBA, ABCCBA
    blocks = []
    for b in range(a.blocks):
        mode = order[b % len(order)]
        lv = levels(mode)
        for _ in range(a.settle):
            step()
        c0, n0, r0 = (lv.cost_s, lv.step, reader.reads) if lv else (0.0, 0, 0)
        times = [step() for _ in range(a.block - a.settle)]
        blk = {"mode": mode, "median_s": statistics.median(times)}
        if lv:
            n = max(1, lv.step - n0)
            blk.update(own_s_per_step=(lv.cost_s - c0) / n, read_share=(reader.reads - r0) / n,
                       strides=dict(getattr(lv, "strides", {})), base_s=getattr(lv, "base", None),
                       extra_s=getattr(lv, "extra", None), sparse=getattr(lv, "sparse", None),
                       pre_s=getattr(lv, "pre", None))
        blocks.append(blk)
    stop.set()
    out = {"torch": torch.__version__, "python": sys.version.split()[0], "model": a.model, "threads": a.threads}
    med_off = statistics.median(b["median_s"] for b in blocks if b["mode"] == "off")
    out["median_off_s"] = med_off
    for mode in mods:
        own = [b["own_s_per_step"] for b in blocks if b["mode"] == mode]
        # per round of len(order) blocks: the mode's blocks less the "off" blocks
        diffs = []
        for r in range(0, a.blocks - len(order) + 1, len(order)):
            rb = blocks[r:r + len(order)]
            diffs.append(statistics.mean(b["median_s"] for b in rb if b["mode"] == mode) -
                         statistics.mean(b["median_s"] for b in rb if b["mode"] == "off"))
        out[mode] = {"median_s": statistics.median(b["median_s"] for b in blocks if b["mode"] == mode),
                     "diff_median_s": statistics.median(diffs) if diffs else None, "diffs_s": diffs,
                     "own_s_per_step_median": statistics.median(own), "own_share": statistics.median(own) / med_off,
                     "read_share_median": statistics.median(b["read_share"] for b in blocks if b["mode"] == mode)}
        # the same hooks in a loop without the model: warm caches
        lv = levels(mode)
        x = torch.zeros(4, 64)
        hot = []
        for _ in range(5):
            c0, n0 = lv.cost_s, lv.step
            t = time.perf_counter()
            for _ in range(2000):
                lv.root_pre(model, (x,), {})
                lv.root_post(model, (x,), None)
                lv.on_optimizer_step(opt, (), {})
            hot.append(((time.perf_counter() - t) / 2000, (lv.cost_s - c0) / (lv.step - n0)))
        levels("off")
        out[mode].update(hot_loop_s_per_step=min(h[0] for h in hot), hot_own_s_per_step=min(h[1] for h in hot))
    out["blocks"] = blocks
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
