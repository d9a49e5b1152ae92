"""The tensor walk (vramscope/agent/_tensors.py) on real torch: each holder route,
transformers' key/value caches, and the module of a frozen layer's
activations under peft LoRA. On CUDA tensors where torch has a GPU (the
H200: docs/oom-naming.md keeps the output), else on CPU tensors, which the
walk names when asked (name_tensors(cpu=True)) by the same routes, with
their storage's data_ptr as on CUDA: make test runs them under the CPU
torch interpreter that make setup builds (.venv-torch: Debian's torch 1.13,
transformers and peft pinned in jupyter/requirements-torch.txt), from an
interpreter without torch through test_under_torch_python."""
import gc
import importlib
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import IN_CI, PKG_PARENT, require_module, torch_python

try:
    import torch
except ImportError:  # make test's .venv: test_under_torch_python runs this file where torch is
    torch = None

from vramscope.agent import _tensors  # noqa: E402

DEVICE = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"


@pytest.fixture(params=[DEVICE])
def dev(request):
    """The device the walk's tensors are on: CUDA where there is one, else the CPU."""
    if torch is None:
        pytest.skip("no torch in this interpreter: test_under_torch_python runs these under one")
    return request.param


def test_under_torch_python(tmp):
    """Without torch here (make test's .venv), this file's tests run under the
    torch interpreter, on CPU, and must all pass there (in CI none may skip)."""
    if torch is not None:
        pytest.skip("torch is in this interpreter: the tests beside this one ran in it")
    py = torch_python("transformers", "peft", "pytest")
    env = dict(os.environ, PYTHONPATH=PKG_PARENT, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf"))
    res = subprocess.run([py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-k", "not test_under_torch_python",
                          os.path.abspath(__file__)], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
    print(res.stdout[-3000:])
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    summary = res.stdout.strip().splitlines()[-1]
    assert re.match(r"\d+ passed", summary) and not (IN_CI and "skipped" in summary), summary


HELPER = textwrap.dedent('''\
    import functools

    import torch

    DEVICE = %(device)r
    _CACHE = {}


    def mask(n, offset):
        return _CACHE.setdefault((16, n, offset), torch.zeros(16, n, device=DEVICE))


    class Rotary:
        _tables = {}

        @classmethod
        def table(cls, n):
            return cls._tables.setdefault((n, 1.0), torch.ones(n, 64, device=DEVICE))


    def _counter():
        kept = []

        def keep(n):
            kept.append(torch.ones(n, device=DEVICE))
        return keep


    keep = _counter()


    @functools.lru_cache(maxsize=None)
    def unbounded(n):
        return torch.ones(n, 3, device=DEVICE)


    @functools.lru_cache(maxsize=16)
    def bounded(n):
        return torch.ones(n, 5, device=DEVICE)
''')


def walk(dev):
    gc.collect()
    res = _tensors.name_tensors(torch, cpu=dev == "cpu")
    return res, {e[1]: e for e in res["entries"]}


def ptr(t):
    """The address of t's storage (torch 1.x has no untyped_storage: its storage() has the same data_ptr)."""
    return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).data_ptr()


@pytest.fixture
def helper(tmp_path, monkeypatch, dev):
    (tmp_path / "cudacache.py").write_text(HELPER % {"device": dev})
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("cudacache")
    yield mod
    sys.modules.pop("cudacache", None)


def test_helper_module_globals(helper, dev):
    m = ptr(helper.mask(512, 4821))
    r = ptr(helper.Rotary.table(1024))
    helper.keep(7)
    k = ptr(helper.keep.__closure__[0].cell_contents[0])
    u, b = ptr(helper.unbounded(11)), ptr(helper.bounded(13))
    res, n = walk(dev)
    print("walk", res["took_ms"], "ms", res["routes"])
    assert n[m][3:5] == ["global", "cudacache._CACHE[(16, 512, 4821)]"] and n[m][8] == [16, 512]
    assert n[m][6] == helper.__file__ and n[m][7] == 6
    assert n[r][4] == "cudacache.Rotary._tables[(1024, 1.0)]" and n[r][7] == 14
    assert n[k][4] == "cudacache.keep.<locals>.kept[0]"
    assert n[u][4] == "cudacache.unbounded.<lru_cache>[11]"
    assert n[b][4] == "cudacache.bounded.<lru_cache>[13]", "bounded lru_cache entries on Python %s" % sys.version


def test_nested_local_and_non_persistent_buffer(dev):
    class Entry:
        def __init__(self, t):
            self.tensors = {"k": t}

    class Store:
        def __init__(self):
            self.layers = [Entry(torch.ones(8, device=dev) * i) for i in range(3)]

    store = Store()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).to(dev)
    model.register_buffer("inv_freq", torch.ones(32, device=dev), persistent=False)
    _, n = walk(dev)
    e = n[ptr(store.layers[2].tensors["k"])]
    assert e[3] == "local" and e[4].startswith("store.layers[2].tensors['k'] in test_nested_local"), e
    assert n[ptr(model.inv_freq)][3:5] == ["buffer", "model.inv_freq"]


def tiny_gpt2(dev, layers=2):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=128, n_head=4, n_positions=256, vocab_size=1000)
    return GPT2LMHeadModel(cfg).to(dev)


def test_transformers_dynamic_cache(dev):
    model = tiny_gpt2(dev).eval()
    with torch.no_grad():
        out = model(input_ids=torch.randint(0, 1000, (2, 40), device=dev), use_cache=True)
    _, n = walk(dev)
    kv = sorted(e[4] for e in n.values() if e[3] == "kv_cache")
    print("kv_cache names:", kv[:4], type(out.past_key_values).__name__)
    if type(out.past_key_values) is tuple:
        # transformers 4.x (the CPU interpreter's 4.46): GPT-2 returns legacy tuples whose key and
        # value are views of one storage (c_attn's output, split): one entry a layer.
        assert [re.sub(r"\[[01]\] in .*", "", k) for k in kv] == ["out['past_key_values'][%d]" % i for i in (0, 1)], kv
    else:
        assert len(kv) == 4, kv
        assert kv[0].startswith("out['past_key_values'].layers[0].keys in test_transformers_dynamic_cache"), kv
    assert all(e[8] == [2, 4, 40, 32] for e in n.values() if e[3] == "kv_cache")


def test_transformers_cache_object(dev):
    """A Cache passed in (a Llama's DynamicCache: key_cache/value_cache lists in transformers 4.x,
    layers[i].keys/.values in 5.x): each layer's keys and values by one name."""
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)
    model = LlamaForCausalLM(cfg).to(dev).eval()
    cache = DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.randint(0, 1000, (3, 24), device=dev), past_key_values=cache, use_cache=True)
    _, n = walk(dev)
    kv = {re.sub(r" in .*", "", e[4]): e[8] for e in n.values() if e[3] == "kv_cache"}
    want = ["cache.layers[%d].%s" % (i, a) for i in (0, 1) for a in ("keys", "values")]
    assert sorted(kv) == want, sorted(kv)
    assert all(shape == [3, 2, 24, 16] for shape in kv.values()), kv


def test_legacy_past_key_values_tuples(dev):
    past_key_values = tuple((torch.ones(1, 4, 10, 32, device=dev), torch.ones(1, 4, 10, 32, device=dev))
                            for _ in range(3))
    _, n = walk(dev)
    e = n[ptr(past_key_values[2][1])]
    assert e[3] == "kv_cache" and e[4].startswith("past_key_values[2][1] in "), e


@pytest.mark.parametrize("autocast", [False, True])
def test_lora_names_the_frozen_mlp(dev, autocast):
    """peft LoRA on c_attn: the GELU's saved tensors belong to mlp.c_fc, not
    to the nearest trainable parameter (c_attn's lora_A)."""
    peft = require_module("peft")
    model = peft.get_peft_model(tiny_gpt2(dev), peft.LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    ids = torch.randint(0, 1000, (2, 64), device=dev)
    with torch.autocast(dev, dtype=torch.bfloat16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss  # noqa: F841  the graph's root, a local
    res, n = walk(dev)
    gelu = [e for e in n.values() if e[3] == "activation" and
            any(k in e[4] for k in ("PowBackward0", "TanhBackward0", "GeluBackward0"))]
    print("autocast" if autocast else "fp32", sorted({(e[4], e[5]) for e in gelu})[:6])
    assert gelu, "no GELU activations named: %s" % sorted({e[4] for e in n.values()})[:20]
    for e in gelu:
        assert e[5].endswith(".mlp.c_fc"), e
        assert "lora" not in e[4], e
    del model


def test_walk_holds_no_tensor_the_job_drops(dev, monkeypatch):
    """The walk runs beside the user's step: a tensor whose last reference the
    job drops while the walk is under way is freed then, not when the walk
    ends (near a cap, holding one step's temporaries for the walk's length
    was an OOM on the H200; docs/oom-warning.md)."""
    import weakref

    held = [torch.ones(1024, 1024, device=dev)]
    ref = weakref.ref(held[0])
    freed_mid_walk = []
    optimizers = _tensors._optimizers

    def step_goes_on(w, optims):  # the job's step ends while the walk runs
        held.clear()
        freed_mid_walk.append(ref() is None)
        return optimizers(w, optims)

    monkeypatch.setattr(_tensors, "_optimizers", step_goes_on)
    res = _tensors.name_tensors(torch, cpu=dev == "cpu")
    assert res is not None and freed_mid_walk == [True]


def test_reentrant_checkpoint_under_the_backward_wrapper(dev):
    """Reentrant checkpointing calls torch.autograd.backward inside the user's
    backward (on CUDA, from autograd's device thread): with the agent's
    wrapper and its graph_lock in place, it must finish, leave no backward
    counted and the lock free (tests/test_walk_beside_backward.py has the
    cross-thread case with fakes)."""
    import threading

    import torch.utils.checkpoint as ck

    from vramscope.agent import _torch as vt

    vt.wrap_backward(torch)
    try:
        lin = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8)).to(dev)
        x = torch.randn(4, 8, device=dev, requires_grad=True)
        out = {}

        def run():
            y = ck.checkpoint(lin, x, use_reentrant=True)
            y.sum().backward()
            out["grad"] = lin[0].weight.grad is not None

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "backward never returned: the reentrant backward waited for its caller's lock"
        assert out.get("grad") and vt.backward_depth[0] == 0 and not vt.graph_lock.locked()
    finally:
        vt.unwrap_backward()


def test_autograd_grad_holds_the_graph_lock(dev):
    """torch.autograd.grad (a gradient penalty) is a backward pass too: under
    the agent's wrapper it holds graph_lock while it runs, and a grad inside
    a backward() (double backward) does not wait for its caller."""
    from vramscope.agent import _torch as vt

    vt.wrap_backward(torch)
    try:
        seen = []
        w = torch.randn(8, 8, device=dev, requires_grad=True)
        x = torch.randn(4, 8, device=dev, requires_grad=True)

        def hook(g):
            seen.append((vt.graph_lock.locked(), vt.backward_depth[0]))
            return g

        y = (x @ w).tanh()
        y.register_hook(hook)
        (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        assert seen == [(True, 1)], seen
        penalty = (gx.norm() - 1) ** 2
        penalty.backward()
        assert w.grad is not None and vt.backward_depth[0] == 0 and not vt.graph_lock.locked()
    finally:
        vt.unwrap_backward()
    assert not getattr(torch.autograd.grad, "__vramscope__", False)
