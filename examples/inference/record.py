"""Records inference programs (issue #27) on a CUDA machine, for the engine's tests.

Run from the repository root on the GPU machine (bin/vramscope built; torch,
transformers; no network: every model is built from a config with random weights):

    python3 examples/inference/record.py --out OUT [--bin bin/vramscope] [CASE...]

Cases ("agent": under `vramscope run`, the snapshot taken through the daemon or
the OOM capture the agent handed it; "plain": this process records with
torch.cuda.memory._record_memory_history and dumps the snapshot):

  gen_oom          agent, default sampling: GPT-2 medium (bf16) batch generate(); the batch doubles
                   (8, 16, 32, ...) at 512 + 256 tokens until the KV cache does not fit a 3 GiB cap
                   (set_per_process_memory_fraction). The OOM capture, named by the agent's walk.
  gen_oom_traced   the same with 4 layers under a 1 GiB cap, recording all along (VRAMSCOPE_SAMPLE=off,
                   the last 30,000 entries): the trace shows the cache growing
  static_graphs    agent, recording all along: Llama (2 layers) decoding a static cache token by token
                   through the model compiled with torch.compile(mode="reduce-overhead") (CUDA graphs
                   in a private pool); should that not compile, a plain-torch decoder compiled the
                   same way, then a decode step captured by hand with torch.cuda.graph. Snapshot
                   while the cache is alive.
  eval_keep        plain: GPT-2 124M (fp32) evaluation over 24 batches of 4 x 128 that keeps every
                   batch's logits on the GPU (103 MB each), then concatenates and frees them
                   -> loop_accumulation at the append, 24 iterations
  serve_growing    agent, default sampling: a request loop (GPT-2, 8 layers) whose batch grows
                   (1, 2, 4, ... 64) at 64 + 64 tokens; the driver asks for a snapshot while it
                   serves and times how long the agent took to give a recorded window
  whatif_base      agent, recording all along: GPT-2 (8 layers, 1024 wide, bf16) generate() of
                   4 x (64 + 64), the cache kept alive (return_dict_in_generate) for the snapshot
  whatif_measure   plain, no recording: the same model's peak (torch.cuda.max_memory_allocated)
                   at 2-8x that size, for `vramscope whatif --generate` to be checked against
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "examples", "record"))
import workloads as W  # noqa: E402
from record_piles import Daemon, wait_for  # noqa: E402

GIB = 1 << 30

# name -> (runner, environment for the agent's process)
CASES = {
    "gen_oom": ("agent-oom", {}),
    "gen_oom_traced": ("agent-oom", {"VRAMSCOPE_SAMPLE": "off", "max_entries": 30_000}),
    "static_graphs": ("agent", {"VRAMSCOPE_SAMPLE": "off"}),
    "eval_keep": ("plain", {}),
    "serve_growing": ("agent-live", {}),
    "whatif_base": ("agent", {"VRAMSCOPE_SAMPLE": "off"}),
    "whatif_measure": ("plain", {}),
}
WHATIF_MODEL = dict(layers=8, embd=1024, heads=16, positions=2048)
WHATIF_BASE = (4, 64, 64)  # batch, prompt, new tokens
WHATIF_SIZES = [(4, 64, 64), (8, 64, 64), (16, 64, 64), (32, 64, 64), (4, 128, 128), (4, 256, 256), (4, 512, 512),
                (8, 128, 128), (16, 128, 128), (8, 256, 256), (4, 448, 64), (4, 64, 448)]


def facts(name, **kw):
    kw.update(name=name, torch=torch.__version__, device=torch.cuda.get_device_name(0),
              device_total=torch.cuda.get_device_properties(0).total_memory, max_allocated=torch.cuda.max_memory_allocated(),
              allocated_now=torch.cuda.memory_allocated(), reserved_now=torch.cuda.memory_reserved(),
              recorded_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), script="examples/inference/record.py:" + name)
    try:
        import transformers
        kw["transformers"] = transformers.__version__
    except Exception:
        pass
    return kw


def write(out, name, f):
    with open(os.path.join(out, name + ".json"), "w") as fh:
        json.dump(f, fh, indent=1)
    print(json.dumps({k: v for k, v in f.items() if k not in ("allocated_after", "sizes")}), flush=True)


def wait_go(a):
    """Under the agent: say where we are, then wait for the driver's snapshot."""
    with open(a.ready, "w") as f:
        f.write(str(os.getpid()))
    while not os.path.exists(a.go):
        time.sleep(0.05)


# --- the cases ---------------------------------------------------------------------


def gen_oom(a, layers=24, cap=3 * GIB):
    model = W.gpt2(layers=layers)
    torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(0).total_memory)
    tried = []
    batch = 8
    try:
        while batch <= 1024:
            tried.append(batch)
            W.generate(model, batch=batch, prompt_len=512, new=256)  # expect: oom (the KV cache)
            torch.cuda.synchronize()
            batch *= 2
    except torch.cuda.OutOfMemoryError as e:
        write(a.out, a.child, facts(a.child, cap=cap, batches=tried, failed_batch=batch, prompt=512, new=256,
                                    layers=layers, kv_bytes_per_token=layers * 2 * 1024 * 2, error=str(e)[:300]))
        return
    write(a.out, a.child, facts(a.child, cap=cap, batches=tried, failed_batch=None))


def gen_oom_traced(a):
    gen_oom(a, layers=4, cap=GIB)


def static_graphs(a):
    """A static cache decoded by a forward compiled with torch.compile(mode="reduce-overhead"):
    first the transformers model itself, then (should dynamo or inductor refuse it) a plain-torch
    decoder of the same shapes, then a decode step captured by hand with torch.cuda.graph. The
    facts name which one ran and why the others did not."""
    tried, out, how = [], None, None
    for name, fn in (("torch.compile(mode='reduce-overhead') of LlamaForCausalLM, static cache, decode loop",
                      compiled_decode), ("torch.compile(mode='reduce-overhead') of a plain-torch decoder, static KV "
                                         "buffers", compiled_plain), ("torch.cuda.graph by hand", lambda: hand_graph(W.llama(layers=2)))):
        if os.environ.get("RECORD_HAND_GRAPH") and "compile" in name:
            tried.append({"how": name, "error": "RECORD_HAND_GRAPH set: skipped"})
            continue
        t = time.perf_counter()
        try:
            out = fn()
            torch.cuda.synchronize()
            how = name
            tried.append({"how": name, "ok": True, "s": round(time.perf_counter() - t, 1)})
            break
        except Exception as e:
            tried.append({"how": name, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else ""),
                          "s": round(time.perf_counter() - t, 1)})
            out = None
            torch.cuda.synchronize()
    skips = None
    try:
        from torch._dynamo.utils import counters
        skips = {k: v for k, v in counters.get("inductor", {}).items() if "cudagraph" in k}
    except Exception:
        pass
    write(a.out, a.child, facts(a.child, how=how, tried=tried, cudagraph_counters=skips))
    wait_go(a)
    del out


def compiled_decode(batch=4, prompt_len=32, new=32):
    """transformers' Llama (2 layers) compiled whole with reduce-overhead, decoding a StaticCache
    token by token (generate() is not used: with transformers 5.17 it failed to compile here)."""
    from transformers import StaticCache
    model = W.llama(layers=2)
    cache = StaticCache(config=model.config, max_batch_size=batch, max_cache_len=prompt_len + new, device="cuda",
                        dtype=torch.bfloat16)
    step = torch.compile(model, mode="reduce-overhead")
    ids = W.prompt(model, batch, prompt_len)
    with torch.no_grad():
        logits = model(input_ids=ids, past_key_values=cache, cache_position=torch.arange(prompt_len, device="cuda"),
                       use_cache=True).logits  # prefill eager: one shape fewer to compile
        nxt = logits[:, -1:].argmax(-1)
        for t in range(prompt_len, prompt_len + new):
            torch.compiler.cudagraph_mark_step_begin()
            logits = step(input_ids=nxt, past_key_values=cache, cache_position=torch.tensor([t], device="cuda"),
                          use_cache=True).logits
            nxt = logits[:, -1:].argmax(-1).clone()
    return (step, cache, nxt)


class PlainDecoder(torch.nn.Module):
    """Two attention + MLP blocks decoding one token against static KV buffers (index_copy_)."""

    def __init__(self, batch, length, hidden=256, heads=4, vocab=32000, layers=2):
        super().__init__()
        nn = torch.nn
        self.heads, self.dim = heads, hidden // heads
        self.emb = nn.Embedding(vocab, hidden)
        self.qkv = nn.ModuleList(nn.Linear(hidden, 3 * hidden, bias=False) for _ in range(layers))
        self.o = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))
                                 for _ in range(layers))
        self.head = nn.Linear(hidden, vocab, bias=False)
        for i in range(layers):
            self.register_buffer("k%d" % i, torch.zeros(batch, heads, length, self.dim))
            self.register_buffer("v%d" % i, torch.zeros(batch, heads, length, self.dim))

    def forward(self, ids, pos):
        x = self.emb(ids)
        b = x.shape[0]
        for i in range(len(self.qkv)):
            q, k, v = self.qkv[i](x).view(b, 1, 3, self.heads, self.dim).permute(2, 0, 3, 1, 4)
            kc, vc = getattr(self, "k%d" % i), getattr(self, "v%d" % i)
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            y = torch.nn.functional.scaled_dot_product_attention(q, kc, vc)
            x = x + self.o[i](y.transpose(1, 2).reshape(b, 1, -1))
            x = x + self.mlp[i](x)
        return self.head(x)


def compiled_plain(batch=4, length=64):
    model = PlainDecoder(batch, length).to(device="cuda", dtype=torch.bfloat16).eval()
    step = torch.compile(model, mode="reduce-overhead")
    nxt = torch.zeros(batch, 1, dtype=torch.long, device="cuda")
    with torch.no_grad():
        for t in range(length):
            torch.compiler.cudagraph_mark_step_begin()
            logits = step(nxt, torch.tensor([t], device="cuda"))
            nxt = logits[:, -1:].argmax(-1).clone()
    return (step, model, nxt)


def hand_graph(model):
    """A decode step of a fixed-size static cache, captured into a CUDA graph and replayed."""
    from transformers import StaticCache
    cache = StaticCache(config=model.config, max_batch_size=4, max_cache_len=128, device="cuda", dtype=torch.bfloat16)
    ids = torch.zeros(4, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(2):
            model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        logits = model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True).logits
    for t in range(64):
        pos.fill_(t)
        g.replay()
        ids.copy_(logits[:, -1:].argmax(-1))
    return (g, cache, logits)


def eval_keep(a):
    model = W.gpt2(layers=12, embd=768, heads=12, positions=1024, dtype=torch.float32)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100_000,
                                             global_record_annotations=True)
    all_logits, after = [], []
    with torch.no_grad():
        for _i in range(24):
            ids = torch.randint(0, model.config.vocab_size, (4, 128), device="cuda")
            out = model(input_ids=ids, use_cache=False)
            all_logits.append(out.logits)  # expect: loop_accumulation (103 MB a batch kept on the GPU)
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
        preds = torch.cat(all_logits).argmax(-1).cpu()
    del all_logits, out
    torch.cuda.synchronize()
    path = os.path.join(a.out, "eval_keep.pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    write(a.out, "eval_keep", facts("eval_keep", iterations=24, kept_per_iteration=4 * 128 * model.config.vocab_size * 4,
                                    allocated_after=after, predictions=int(preds.numel()),
                                    snapshot_bytes=os.path.getsize(path)))


def serve_growing(a):
    model = W.gpt2(layers=8)
    sizes, i = [], 0
    with open(a.ready, "w") as f:
        f.write(str(os.getpid()))
    while not os.path.exists(a.go) and i < 400:  # serving while the driver asks for its snapshot
        batch = 1 << (i % 7)
        out = W.generate(model, batch=batch, prompt_len=64, new=64, return_dict_in_generate=True)
        torch.cuda.synchronize()
        sizes.append([batch, torch.cuda.max_memory_allocated()])
        i += 1
    del out
    write(a.out, a.child, facts(a.child, requests=i, sizes=sizes))


def whatif_base(a):
    model = W.gpt2(**WHATIF_MODEL)
    b, p, n = WHATIF_BASE
    torch.cuda.reset_peak_memory_stats()
    out = W.generate(model, batch=b, prompt_len=p, new=n, return_dict_in_generate=True)
    torch.cuda.synchronize()
    write(a.out, a.child, facts(a.child, batch=b, prompt=p, new=n, model=WHATIF_MODEL,
                                weights=sum(x.numel() * x.element_size() for x in model.parameters())))
    wait_go(a)
    del out


def whatif_measure(a):
    model = W.gpt2(**WHATIF_MODEL)
    rows = []
    for b, p, n in WHATIF_SIZES:
        for new in (n, 1):  # the whole generation, and the prompt's forward alone
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            W.generate(model, batch=b, prompt_len=p, new=new)
            torch.cuda.synchronize()
            rows.append({"batch": b, "prompt": p, "new": new, "peak_allocated": torch.cuda.max_memory_allocated(),
                         "peak_reserved": torch.cuda.max_memory_reserved(), "allocated_before": base})
    write(a.out, "whatif_measure", facts("whatif_measure", model=WHATIF_MODEL, base=WHATIF_BASE, sizes=rows,
                                         weights=sum(x.numel() * x.element_size() for x in model.parameters())))


# --- the driver -----------------------------------------------------------------------


def newest_capture(data, since):
    import glob
    files = [f for f in glob.glob(os.path.join(data, "**", "*.pickle"), recursive=True) + glob.glob(
        os.path.join(data, "**", "*.vsm"), recursive=True) if os.path.getmtime(f) >= since]
    return max(files, key=os.path.getmtime) if files else None


def run_agent(d, bin_, out, name, max_entries):
    runner, extra = CASES[name]
    extra = dict(extra)
    max_entries = extra.pop("max_entries", max_entries)
    ready, go = os.path.join(d.tmp, name + ".ready"), os.path.join(d.tmp, name + ".go")
    cmd = [bin_, "run", "--socket", d.sock, "--max-entries", str(max_entries), "--", sys.executable,
           os.path.abspath(__file__), "--out", out, "--child", name, "--ready", ready, "--go", go]
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "jupyter"), os.environ.get("PYTHONPATH")]))
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env)
    snap, took = None, None
    if runner == "agent-oom":
        p.wait(timeout=600)
        path = wait_for(lambda: newest_capture(os.path.join(d.tmp, "data"), t0), 60, name + "'s OOM capture")
        ext = os.path.splitext(path)[1]
        shutil.copy(path, os.path.join(out, name + ext))
        snap = {"path": path, "bytes": os.path.getsize(path)}
    else:
        pid = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 600, name + " is ready"))
        wait_for(lambda: any(x["pid"] == pid and x["agent"] for x in d.call("process.list")["processes"]), 60,
                 name + "'s agent registered")
        if runner == "agent-live":
            time.sleep(8)  # serving: past the warm-up, between the clock's windows
        t = time.perf_counter()
        snap = d.call("snapshot.take", {"pid": pid, "label": name})
        took = time.perf_counter() - t
        ext = ".vsm" if snap.get("format") == "vsm1" else ".pickle"
        shutil.copy(snap["path"], os.path.join(out, name + ext))
        open(go, "w").close()
        p.wait(timeout=600)
    fp = os.path.join(out, name + ".json")
    f = json.load(open(fp)) if os.path.exists(fp) else {"name": name}
    f.update(runner=runner, env=extra, max_entries=max_entries, snapshot_file=name + ext, snapshot_bytes=snap.get("bytes"),
             entries=snap.get("entries"), gpu_bytes=snap.get("gpu_bytes"), other_gpu_bytes=snap.get("other_gpu_bytes"),
             snapshot_take_s=took, agent_rc=p.returncode)
    write(out, name, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--bin", default="bin/vramscope")
    ap.add_argument("--max-entries", type=int, default=60_000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    ap.add_argument("--go", help=argparse.SUPPRESS)
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        globals()[a.child](a)
        return
    d = None
    for name in a.cases or list(CASES):
        t = time.perf_counter()
        try:
            if CASES[name][0] == "plain":
                a.child = name
                globals()[name](a)
                a.child = None
            else:
                if d is None:
                    import tempfile
                    d = Daemon(os.path.abspath(a.bin), tempfile.mkdtemp(prefix="vsinfer"))
                run_agent(d, os.path.abspath(a.bin), a.out, name, a.max_entries)
        except Exception as e:  # one broken case must not cost the others
            print("%s: FAILED %s: %s" % (name, type(e).__name__, e), flush=True)
            torch.cuda.memory._record_memory_history(enabled=None)
        print("%s: %.1fs" % (name, time.perf_counter() - t), flush=True)
    if d is not None:
        d.close()


if __name__ == "__main__":
    main()
