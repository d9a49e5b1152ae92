"""Records memory that piles up (issue #16), and healthy look-alikes, on a CUDA machine.

Run from the repository root on the GPU machine (bin/vramscope built; torch 2.11,
transformers; no network: every model is built from a config with random weights):

    python3 examples/record/record_piles.py --out examples/snapshots/findings [--bin bin/vramscope] [CASE...]

Plain cases record in this process with torch.cuda.memory._record_memory_history and
write NAME.pickle; cases marked "agent" run under `vramscope run` (the agent records) and
the driver takes their snapshot through the daemon (snapshot.take) into NAME.pickle or
NAME.vsm, with NVML's view of the process in NAME.json (gpu_bytes). Every NAME.json holds
what the run measured, the known iteration count and the expected finding; the same
expectations are in examples/snapshots/expected_findings.json, which the Go test
TestExpectedFindings checks (and, at the end, this script: PASS/FAIL per case and
OUT/piles_check.json, with `vramscope analyze`). All cases together should take 2-4 minutes on an H200 (an estimate: not yet run).

Loop accumulation (a loop keeps every iteration's output on the GPU until it ends):
  accum_eval_logits    GPT-2 (4 layers) eval over 16 batches, every batch's logits kept, then
                       concatenated and freed; no optimizer, plain      -> loop_accumulation, 16 iterations
  accum_gen_scores     Llama (4 layers) hand-written greedy generation, 97 forward passes, each
                       step's last-token logits kept; under the agent   -> loop_accumulation, 97 iterations
  accum_train_preds    conv segmentation net, SGD with momentum, 14 steps; the first 12 steps'
                       predictions kept for an epoch metric, then cleared -> loop_accumulation, 14 steps
  healthy_eval_host    accum_eval_logits moving each batch's argmax to the host -> nothing, 16 iterations
  healthy_kv_generate  Llama model.generate(): a KV cache that grows within one request and is freed
                       after it, three requests                          -> nothing
  healthy_grad_accum   GPT-2 (2 layers), AdamW, 6 steps of 4 micro-batches: gradients accumulate,
                       the optimizer state is made at the first step     -> nothing, 6 steps
Unbounded cache (a cache keyed by shape still adding entries when the snapshot ends):
  ucache_bias_train    transformer encoder, AdamW, 20 steps; an attention-bias table per sequence
                       length, 9 lengths, new ones until step 18          -> unbounded_cache, 20 steps
  ucache_mask_infer    attention inference, 24 iterations; a causal mask per length, 11 lengths,
                       new ones until iteration 22; plain                 -> unbounded_cache, 24 iterations
  ucache_workspace     Llama (2 layers) inference service, 30 requests; a workspace per (batch,
                       length), 12 shapes, new ones until request 28; under the agent -> unbounded_cache, 30
  healthy_cuda_graphs  MLP served by CUDA graphs captured per batch bucket as buckets arrive (the last
                       at iteration 17 of 20); graph memory in private pools -> nothing, 20 iterations
  healthy_lru_cache    ucache_mask_infer with the mask cache bounded to 3 entries (LRU): entries are
                       evicted as new lengths come                        -> nothing, 24 iterations
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import OrderedDict

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_ENTRIES = 100_000

# name -> (runner, known iterations, expected finding kinds)
CASES = {
    "accum_eval_logits": ("plain", 16, ["loop_accumulation"]),
    "accum_gen_scores": ("agent", 97, ["loop_accumulation"]),
    "accum_train_preds": ("plain", 14, ["loop_accumulation"]),
    "healthy_eval_host": ("plain", 16, []),
    "healthy_kv_generate": ("plain", None, []),
    "healthy_grad_accum": ("plain", 6, []),
    "ucache_bias_train": ("plain", 20, ["unbounded_cache"]),
    "ucache_mask_infer": ("plain", 24, ["unbounded_cache"]),
    "ucache_workspace": ("agent", 30, ["unbounded_cache"]),
    "healthy_cuda_graphs": ("plain", 20, []),
    "healthy_lru_cache": ("plain", 24, []),
}


class Run:
    """Where a case records: in this process (plain), or under the agent (the
    driver takes the snapshot while the case waits)."""

    def __init__(self, out, agent=None):
        self.out, self.agent = out, agent  # agent: (ready file, go file) or None

    def begin(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        if not self.agent:
            torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                     max_entries=MAX_ENTRIES, global_record_annotations=True)

    def snap(self, name, **facts):
        torch.cuda.synchronize()
        runner, iterations, expect = CASES[name]
        facts.update(name=name, runner=runner, iterations=iterations, expect=expect, torch=torch.__version__,
                     device=torch.cuda.get_device_name(0), device_total=torch.cuda.get_device_properties(0).total_memory,
                     max_allocated=torch.cuda.max_memory_allocated(), allocated_now=torch.cuda.memory_allocated(),
                     reserved_now=torch.cuda.memory_reserved(), recorded_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     script="examples/record/record_piles.py:" + name)
        if self.agent:
            facts["pid"] = os.getpid()
            with open(os.path.join(self.out, name + ".json"), "w") as f:
                json.dump(facts, f, indent=1)
            ready, go = self.agent
            with open(ready, "w") as f:
                f.write(str(os.getpid()))
            while not os.path.exists(go):  # the driver takes the snapshot now
                time.sleep(0.05)
            return
        path = os.path.join(self.out, name + ".pickle")
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
        facts["snapshot_bytes"] = os.path.getsize(path)
        with open(os.path.join(self.out, name + ".json"), "w") as f:
            json.dump(facts, f, indent=1)
        print(json.dumps({k: v for k, v in facts.items() if k != "allocated_after"}), flush=True)


def gpt2(layers, embd=512, heads=8):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, n_positions=1024)
    return GPT2LMHeadModel(cfg).cuda()


def llama(layers, hidden=512, heads=8, inter=1376, vocab=32000):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=heads, vocab_size=vocab, max_position_embeddings=2048)
    return LlamaForCausalLM(cfg).cuda().eval()


def accum_eval_logits(run):
    """Evaluation that collects every batch's logits on the GPU, then reduces them."""
    model = gpt2(layers=4).eval()
    run.begin()
    all_logits, after = [], []
    with torch.no_grad():
        for _i in range(16):
            ids = torch.randint(0, model.config.vocab_size, (8, 256), device="cuda")
            out = model(input_ids=ids, use_cache=False)  # expect: loop_accumulation (the logits kept below)
            all_logits.append(out.logits)  # the bug: 411 MB per batch stays on the GPU until the loop ends
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
        preds = torch.cat(all_logits).argmax(-1).cpu()
    del all_logits, out
    run.snap("accum_eval_logits", allocated_after=after, kept_per_iteration=8 * 256 * model.config.vocab_size * 4,
             predictions=int(preds.numel()))


def accum_gen_scores(run):
    """Greedy generation written by hand that keeps every step's scores on the GPU."""
    model = llama(layers=4)
    run.begin()
    ids = torch.randint(0, model.config.vocab_size, (32, 32), device="cuda")
    past, nxt, step_logits, after = None, None, [], []
    with torch.no_grad():
        for _t in range(97):  # the prompt, then 96 new tokens
            out = model(input_ids=ids if past is None else nxt, past_key_values=past, use_cache=True)
            past = out.past_key_values
            step_logits.append(out.logits[:, -1].clone())  # expect: loop_accumulation (4 MiB a token)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            after.append(torch.cuda.memory_allocated())
        best = torch.stack(step_logits).softmax(-1).amax(-1).mean().item()
    del step_logits, past, out, nxt
    run.snap("accum_gen_scores", allocated_after=after, kept_per_iteration=32 * model.config.vocab_size * 4,
             mean_best_prob=best)


class SegNet(torch.nn.Module):
    def __init__(self, classes=21):
        super().__init__()
        chans = [3, 32, 64, 64, 32]
        self.body = torch.nn.Sequential(*[m for a, b in zip(chans, chans[1:])
                                          for m in (torch.nn.Conv2d(a, b, 3, padding=1), torch.nn.ReLU())])
        self.head = torch.nn.Conv2d(chans[-1], classes, 1)

    def forward(self, x):
        return self.head(self.body(x))


def accum_train_preds(run):
    """A training loop that keeps each step's predictions for an end-of-epoch metric."""
    model = SegNet().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    run.begin()
    epoch_preds, after, miou = [], [], None
    for step in range(14):
        x = torch.randn(16, 3, 128, 128, device="cuda")
        y = torch.randint(0, 21, (16, 128, 128), device="cuda")
        logits = model(x)  # expect: loop_accumulation (kept below, 22 MB a step)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        epoch_preds.append(logits.detach())  # the bug: should be logits.argmax(1).cpu()
        if step == 11:  # the end of an "epoch": one metric over all kept predictions, then cleared
            pred = torch.cat(epoch_preds).argmax(1)
            miou = (pred == 0).float().mean().item()
            epoch_preds.clear()
            del pred
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    del logits, loss
    run.snap("accum_train_preds", allocated_after=after, kept_per_iteration=16 * 21 * 128 * 128 * 4, metric=miou)


def healthy_eval_host(run):
    """accum_eval_logits done right: each batch's predictions go to the host."""
    model = gpt2(layers=4).eval()
    run.begin()
    preds, after = [], []
    with torch.no_grad():
        for _i in range(16):
            ids = torch.randint(0, model.config.vocab_size, (8, 256), device="cuda")
            out = model(input_ids=ids, use_cache=False)
            preds.append(out.logits.argmax(-1).cpu())
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
    del out
    run.snap("healthy_eval_host", allocated_after=after)


def healthy_kv_generate(run):
    """model.generate(): the KV cache grows token by token within a request and is freed after it."""
    model = llama(layers=4)
    run.begin()
    lengths = []
    with torch.no_grad():
        for _r in range(3):
            ids = torch.randint(0, model.config.vocab_size, (16, 32), device="cuda")
            out = model.generate(ids, max_new_tokens=64, min_new_tokens=64, do_sample=False, use_cache=True,
                                 pad_token_id=0)
            lengths.append(out.shape[1])
            out = out.cpu()
            torch.cuda.synchronize()
    run.snap("healthy_kv_generate", requests=3, new_tokens=64, lengths=lengths)


def healthy_grad_accum(run):
    """Gradient accumulation: 4 micro-batches per AdamW step; gradients accumulate in place."""
    model = gpt2(layers=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run.begin()
    after = []
    for _step in range(6):
        for _micro in range(4):
            ids = torch.randint(0, model.config.vocab_size, (8, 512), device="cuda")
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss / 4
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    run.snap("healthy_grad_accum", allocated_after=after, micro_batches=4)


def ucache_bias_train(run):
    """An attention-bias table cached per sequence length, new lengths until the end."""
    layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    bias, slopes = {}, torch.linspace(0.1, 1, 8, device="cuda")  # ALiBi-like slopes, one per head
    schedule = [128, 192, 128, 256, 192, 128, 320, 256, 384, 128, 320, 448, 192, 512, 256, 384, 576, 448, 640, 512]
    run.begin()
    after = []
    for _step, n in enumerate(schedule):
        if n not in bias:
            pos = torch.arange(n, device="cuda")
            dist = (pos[None, :] - pos[:, None]).abs().float()
            bias[n] = -dist[None] * slopes[:, None, None]  # expect: unbounded_cache (8 x n x n fp32, never evicted)
        x = torch.randn(8, n, 256, device="cuda")
        loss = model(x, mask=bias[n].repeat(8, 1, 1)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    run.snap("ucache_bias_train", allocated_after=after, schedule=schedule, distinct_lengths=len(bias),
             cache_bytes=sum(t.numel() * 4 for t in bias.values()))


class MaskedAttention(torch.nn.Module):
    def __init__(self, width=1024, heads=8):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x, mask):
        b, n, w = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q / (w // self.heads) ** 0.5) @ k.transpose(-2, -1) + mask
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, w))


MASK_SCHEDULE = [256, 384, 512, 640, 256, 384, 512, 768, 640, 896, 256, 512, 1024, 384, 768, 1152, 896, 1280, 512,
                 1024, 1408, 768, 1536, 1152]


def ucache_mask_infer(run):
    """Inference with a causal mask cached per length; new lengths keep coming."""
    model = MaskedAttention().cuda().eval()
    masks = {}
    run.begin()
    after = []
    with torch.no_grad():
        for n in MASK_SCHEDULE:
            if n not in masks:
                masks[n] = torch.full((n, n), float("-inf"), device="cuda").triu(1)  # expect: unbounded_cache
            y = model(torch.randn(2, n, 1024, device="cuda"), masks[n])
            y.float().norm().item()
            after.append(torch.cuda.memory_allocated())
    run.snap("ucache_mask_infer", allocated_after=after, schedule=MASK_SCHEDULE, distinct_lengths=len(masks),
             cache_bytes=sum(m.numel() * 4 for m in masks.values()))


def healthy_lru_cache(run):
    """ucache_mask_infer with the cache bounded: at most 3 masks, the least recently used evicted."""
    model = MaskedAttention().cuda().eval()
    masks = OrderedDict()
    run.begin()
    after, evicted = [], 0
    with torch.no_grad():
        for n in MASK_SCHEDULE:
            if n in masks:
                masks.move_to_end(n)
            else:
                masks[n] = torch.full((n, n), float("-inf"), device="cuda").triu(1)
                if len(masks) > 3:
                    masks.popitem(last=False)
                    evicted += 1
            y = model(torch.randn(2, n, 1024, device="cuda"), masks[n])
            y.float().norm().item()
            after.append(torch.cuda.memory_allocated())
    run.snap("healthy_lru_cache", allocated_after=after, schedule=MASK_SCHEDULE, evicted=evicted)


def ucache_workspace(run):
    """An inference service that keeps a workspace per (batch, length) it has seen."""
    model = llama(layers=2).model
    hidden = model.config.hidden_size
    shapes = [(4, 128), (8, 128), (4, 128), (8, 128), (4, 256), (4, 128), (8, 256), (4, 256), (8, 128), (2, 512),
              (4, 128), (8, 256), (4, 512), (2, 512), (8, 384), (4, 256), (8, 128), (2, 768), (4, 512), (8, 256),
              (4, 384), (4, 128), (2, 768), (8, 512), (8, 384), (2, 1024), (4, 384), (8, 128), (4, 768), (8, 512)]
    workspaces = {}
    run.begin()
    after = []
    with torch.no_grad():
        for b, n in shapes:
            if (b, n) not in workspaces:
                workspaces[(b, n)] = torch.empty(b, n, 4 * hidden, device="cuda")  # expect: unbounded_cache
            ws = workspaces[(b, n)]
            ids = torch.randint(0, model.config.vocab_size, (b, n), device="cuda")
            h = model(input_ids=ids).last_hidden_state
            ws[..., :hidden].copy_(h)
            ws[..., :hidden].mean().item()
            after.append(torch.cuda.memory_allocated())
    run.snap("ucache_workspace", allocated_after=after, shapes=[list(s) for s in shapes], distinct_shapes=len(workspaces),
             cache_bytes=sum(w.numel() * 4 for w in workspaces.values()))


def healthy_cuda_graphs(run):
    """An MLP served through CUDA graphs, one per batch bucket, captured when a bucket first comes.
    The static input is one buffer of the largest bucket, sliced; graph memory is in private pools."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda().eval()
    buckets = [64, 64, 64, 128, 64, 128, 64, 256, 128, 64, 256, 128, 64, 256, 128, 64, 128, 512, 64, 256]
    static_in = torch.zeros(512, 1024, device="cuda")
    graphs = {}
    run.begin()
    after = []
    with torch.no_grad():
        for b in buckets:
            if b not in graphs:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        model(static_in[:b])
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    static_out = model(static_in[:b])
                graphs[b] = (g, static_out)
            static_in[:b].copy_(torch.randn(b, 1024, device="cuda"))
            g, static_out = graphs[b]
            g.replay()
            probs = static_out.softmax(-1)  # a few ops a request, so the loop is periodic beside the captures
            top = probs.topk(5, dim=-1)
            entropy = -(probs * probs.clamp_min(1e-9).log()).sum(-1)
            (top.values.sum() + probs.mean() + entropy.mean()).item()
            after.append(torch.cuda.memory_allocated())
    run.snap("healthy_cuda_graphs", allocated_after=after, buckets=buckets, graphs=len(graphs))


# The driver: plain cases in this process, agent cases under `vramscope run`.

class Daemon:
    def __init__(self, bin_, tmp):
        self.sock, self.tmp = os.path.join(tmp, "d.sock"), tmp
        self.log = open(os.path.join(tmp, "daemon.log"), "w")
        self.proc = subprocess.Popen([bin_, "serve", "--socket", self.sock, "--data-dir", os.path.join(tmp, "data")],
                                     stdout=self.log, stderr=self.log)
        wait_for(lambda: os.path.exists(self.sock), 20, "the daemon's socket")

    def call(self, method, params=None):
        import socket
        msg = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            msg["params"] = params
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(300)
            s.connect(self.sock)
            s.sendall(json.dumps(msg).encode() + b"\n")
            f = s.makefile("rb")
            while True:
                m = json.loads(f.readline())
                if m.get("id") == 1:
                    if m.get("error"):
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m.get("result")

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def wait_for(fn, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise TimeoutError(what)


def run_agent_case(d, bin_, out, name):
    """Runs one case under `vramscope run`; takes its snapshot through the daemon while it waits."""
    ready, go = os.path.join(d.tmp, name + ".ready"), os.path.join(d.tmp, name + ".go")
    cmd = [bin_, "run", "--socket", d.sock, "--max-entries", str(MAX_ENTRIES), "--", sys.executable,
           os.path.abspath(__file__), "--out", out, "--child", name, "--ready", ready, "--go", go]
    root = os.path.dirname(os.path.dirname(HERE))  # the agent's package is jupyter/vramscope
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(root, "jupyter"), os.environ.get("PYTHONPATH")])))
    p = subprocess.Popen(cmd, env=env)
    pid = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 600, name + " reached its snapshot"))
    wait_for(lambda: any(x["pid"] == pid and x["agent"] for x in d.call("process.list")["processes"]), 60,
             name + "'s agent registered")
    snap = d.call("snapshot.take", {"pid": pid, "label": name})
    ext = ".vsm" if snap.get("format") == "vsm1" else ".pickle"
    shutil.copy(snap["path"], os.path.join(out, name + ext))
    open(go, "w").close()
    p.wait(timeout=300)
    facts_path = os.path.join(out, name + ".json")
    facts = json.load(open(facts_path))
    facts.update(snapshot_file=name + ext, snapshot_bytes=snap.get("bytes"), entries=snap.get("entries"),
                 gpu_bytes=snap.get("gpu_bytes"), other_gpu_bytes=snap.get("other_gpu_bytes"), agent_rc=p.returncode)
    with open(facts_path, "w") as f:
        json.dump(facts, f, indent=1)
    print(json.dumps({k: v for k, v in facts.items() if k != "allocated_after"}), flush=True)


def check(bin_, out, names):
    """What vramscope says of each new recording against its label in
    expected_findings.json (the same check TestExpectedFindings makes, for a
    machine without Go): kinds, the labelled line, the iteration count within one."""
    root = os.path.dirname(os.path.dirname(HERE))
    labels = {e["name"]: e for e in json.load(open(os.path.join(root, "examples", "snapshots", "expected_findings.json")))["recordings"]}
    rows = []
    for name in names:
        e = labels[name]
        path = next((os.path.join(out, name + x) for x in (".pickle", ".vsm") if os.path.exists(os.path.join(out, name + x))), None)
        p = path and subprocess.run([bin_, "analyze", "--json", path], capture_output=True, text=True, timeout=600)
        if not p or p.returncode != 0:
            rows.append({"name": name, "ok": False, "why": p.stderr[-500:] if p else "not recorded"})
            print("FAIL %s: %s" % (name, rows[-1]["why"]), flush=True)
            continue
        r = json.loads(p.stdout)
        kinds = sorted({f["kind"] for f in r["findings"]})
        lines = {"%s:%d" % (os.path.basename(f["file"]), f["line"]) for f in r["findings"] if f["kind"] in e.get("lines", {})}
        steps = sum(len(d["steps"]) for d in r["devices"][:1])
        why = []
        if kinds != sorted(e["kinds"]):
            why.append("kinds %s, want %s" % (kinds, e["kinds"]))
        for k, place in e.get("lines", {}).items():
            if place not in lines:
                why.append("no %s at %s" % (k, place))
        if e.get("iterations") is not None and abs(steps - e["iterations"]) > 1:
            why.append("%d steps, want %d" % (steps, e["iterations"]))
        rows.append({"name": name, "ok": not why, "why": "; ".join(why), "kinds": kinds, "steps": steps,
                     "titles": [f["title"] for f in r["findings"]]})
        print(("PASS " if not why else "FAIL ") + name + (": " + "; ".join(why) if why else ""), flush=True)
    with open(os.path.join(out, "piles_check.json"), "w") as f:
        json.dump(rows, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="examples/snapshots/findings")
    ap.add_argument("--bin", default="bin/vramscope")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    ap.add_argument("--go", help=argparse.SUPPRESS)
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.child:  # under the agent: run the case, wait for the driver's snapshot
        globals()[a.child](Run(a.out, agent=(a.ready, a.go)))
        return
    names = a.cases or list(CASES)
    d = None
    for name in names:
        t = time.perf_counter()
        try:
            if CASES[name][0] == "agent":
                if d is None:
                    import tempfile
                    d = Daemon(os.path.abspath(a.bin), tempfile.mkdtemp(prefix="vspiles"))
                run_agent_case(d, os.path.abspath(a.bin), a.out, name)
            else:
                globals()[name](Run(a.out))
        except Exception as e:  # one broken case must not cost the others
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            torch.cuda.memory._record_memory_history(enabled=None)
        print(f"{name}: {time.perf_counter() - t:.1f}s", flush=True)
    if d is not None:
        d.close()
    check(os.path.abspath(a.bin), a.out, names)


if __name__ == "__main__":
    main()
