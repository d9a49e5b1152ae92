"""The tensor walk (vramscope/_tensors.py) on real torch and CUDA tensors:
each holder route, transformers' key/value caches, and the module of a
frozen layer's activations under peft LoRA. Skipped without torch and a GPU
(CI); run on the H200 (docs/oom-naming.md keeps the output)."""
import gc
import importlib
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from vramscope import _tensors  # noqa: E402

HELPER = textwrap.dedent('''\
    import functools

    import torch

    _CACHE = {}


    def mask(n, offset):
        return _CACHE.setdefault((16, n, offset), torch.zeros(16, n, device="cuda"))


    class Rotary:
        _tables = {}

        @classmethod
        def table(cls, n):
            return cls._tables.setdefault((n, 1.0), torch.ones(n, 64, device="cuda"))


    def _counter():
        kept = []

        def keep(n):
            kept.append(torch.ones(n, device="cuda"))
        return keep


    keep = _counter()


    @functools.lru_cache(maxsize=None)
    def unbounded(n):
        return torch.ones(n, 3, device="cuda")


    @functools.lru_cache(maxsize=16)
    def bounded(n):
        return torch.ones(n, 5, device="cuda")
''')


def walk():
    gc.collect()
    res = _tensors.name_tensors(torch)
    return res, {e[1]: e for e in res["entries"]}


def ptr(t):
    return t.untyped_storage().data_ptr()


@pytest.fixture
def helper(tmp_path, monkeypatch):
    (tmp_path / "cudacache.py").write_text(HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("cudacache")
    yield mod
    sys.modules.pop("cudacache", None)


def test_helper_module_globals(helper):
    m = ptr(helper.mask(512, 4821))
    r = ptr(helper.Rotary.table(1024))
    helper.keep(7)
    k = ptr(helper.keep.__closure__[0].cell_contents[0])
    u, b = ptr(helper.unbounded(11)), ptr(helper.bounded(13))
    res, n = walk()
    print("walk", res["took_ms"], "ms", res["routes"])
    assert n[m][3:5] == ["global", "cudacache._CACHE[(16, 512, 4821)]"] and n[m][8] == [16, 512]
    assert n[m][6] == helper.__file__ and n[m][7] == 5
    assert n[r][4] == "cudacache.Rotary._tables[(1024, 1.0)]" and n[r][7] == 13
    assert n[k][4] == "cudacache.keep.<locals>.kept[0]"
    assert n[u][4] == "cudacache.unbounded.<lru_cache>[11]"
    assert n[b][4] == "cudacache.bounded.<lru_cache>[13]", "bounded lru_cache entries on Python %s" % sys.version


def test_nested_local_and_non_persistent_buffer():
    class Entry:
        def __init__(self, t):
            self.tensors = {"k": t}

    class Store:
        def __init__(self):
            self.layers = [Entry(torch.ones(8, device="cuda") * i) for i in range(3)]

    store = Store()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).cuda()
    model.register_buffer("inv_freq", torch.ones(32, device="cuda"), persistent=False)
    _, n = walk()
    e = n[ptr(store.layers[2].tensors["k"])]
    assert e[3] == "local" and e[4].startswith("store.layers[2].tensors['k'] in test_nested_local"), e
    assert n[ptr(model.inv_freq)][3:5] == ["buffer", "model.inv_freq"]


def tiny_gpt2(layers=2):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=128, n_head=4, n_positions=256, vocab_size=1000)
    return GPT2LMHeadModel(cfg).cuda()


def test_transformers_dynamic_cache():
    model = tiny_gpt2().eval()
    with torch.no_grad():
        out = model(input_ids=torch.randint(0, 1000, (2, 40), device="cuda"), use_cache=True)
    _, n = walk()
    kv = sorted(e[4] for e in n.values() if e[3] == "kv_cache")
    print("kv_cache names:", kv[:4], type(out.past_key_values).__name__)
    assert len(kv) == 4, kv
    assert all(e[8] == [2, 4, 40, 32] for e in n.values() if e[3] == "kv_cache")
    assert kv[0].startswith("out['past_key_values'].layers[0].keys in test_transformers_dynamic_cache"), kv


def test_legacy_past_key_values_tuples():
    past_key_values = tuple((torch.ones(1, 4, 10, 32, device="cuda"), torch.ones(1, 4, 10, 32, device="cuda"))
                            for _ in range(3))
    _, n = walk()
    e = n[ptr(past_key_values[2][1])]
    assert e[3] == "kv_cache" and e[4].startswith("past_key_values[2][1] in "), e


@pytest.mark.parametrize("autocast", [False, True])
def test_lora_names_the_frozen_mlp(autocast):
    """peft LoRA on c_attn: the GELU's saved tensors belong to mlp.c_fc, not
    to the nearest trainable parameter (c_attn's lora_A)."""
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(tiny_gpt2(), peft.LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    ids = torch.randint(0, 1000, (2, 64), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss  # noqa: F841  the graph's root, a local
    res, n = walk()
    gelu = [e for e in n.values() if e[3] == "activation" and
            any(k in e[4] for k in ("PowBackward0", "TanhBackward0", "GeluBackward0"))]
    print("autocast" if autocast else "fp32", sorted({(e[4], e[5]) for e in gelu})[:6])
    assert gelu, "no GELU activations named: %s" % sorted({e[4] for e in n.values()})[:20]
    for e in gelu:
        assert e[5].endswith(".mlp.c_fc"), e
        assert "lora" not in e[4], e
    del model
