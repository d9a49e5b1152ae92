"""Key/value caches in the tensor walk (vramscope/agent/_tensors.py, the contract
with the inference findings): every layout a language model keeps them in,
wherever the cache is held, gives "kv_cache" entries named
<holder>.layers[i].keys|values (legacy tuples: <holder>[i][0|1]) with the
tensor's shape. Fake torch as in test_tensors.py; real transformers caches
in test_tensors_torch.py (on CPU in make test, on CUDA on the H200)."""
import gc

from test_tensors import Module, Tensor, fake_torch, names_by_ptr
from vramscope.agent import _tensors

SHAPE = (2, 8, 512, 64)


def kv(ptr):
    return Tensor(ptr, 2 * 8 * 512 * 64 * 2, shape=SHAPE)


class DynamicLayer:  # transformers >= 4.56: Cache.layers[i].keys / .values
    def __init__(self, k, v):
        self.keys, self.values = k, v


class Cache:
    pass


class DynamicCache(Cache):
    def __init__(self, pairs):
        self.layers = [DynamicLayer(k, v) for k, v in pairs]


class OldDynamicCache(Cache):  # older transformers: key_cache / value_cache lists
    def __init__(self, pairs):
        self.key_cache = [k for k, _ in pairs]
        self.value_cache = [v for _, v in pairs]


class StaticCache(OldDynamicCache):
    pass


class SlotLayer:
    __slots__ = ("k", "v")

    def __init__(self, k, v):
        self.k, self.v = k, v


class KVCache:  # a user's own cache: per-layer objects with slots
    def __init__(self, pairs):
        self.layers = [SlotLayer(k, v) for k, v in pairs]


class Layers:  # a list of per-layer objects in a class not named *Cache: not a kv cache
    def __init__(self, pairs):
        self.layers = [SlotLayer(k, v) for k, v in pairs]


def pairs(base):
    return [(kv(base + 0x100 * i), kv(base + 0x100 * i + 0x80)) for i in range(3)]


def walk():
    gc.collect()
    return names_by_ptr(_tensors.name_tensors(fake_torch))


def check(n, base, holder, legacy=False):
    for i in range(3):
        for j, part in enumerate(("keys", "values")):
            e = n[base + 0x100 * i + 0x80 * j]
            want = "%s[%d][%d]" % (holder, i, j) if legacy else "%s.layers[%d].%s" % (holder, i, part)
            assert e[3] == "kv_cache" and e[4].startswith(want), e
            assert e[8] == list(SHAPE), e


def test_each_layout_held_by_a_local():
    past_key_values = DynamicCache(pairs(0x10000))  # noqa: F841
    old = OldDynamicCache(pairs(0x20000))  # noqa: F841
    static = StaticCache(pairs(0x30000))  # noqa: F841
    mine = KVCache(pairs(0x40000))  # noqa: F841
    legacy_past = tuple(pairs(0x50000))  # noqa: F841
    n = walk()
    check(n, 0x10000, "past_key_values")
    check(n, 0x20000, "old")
    check(n, 0x30000, "static")
    check(n, 0x40000, "mine")
    check(n, 0x50000, "legacy_past", legacy=True)
    assert n[0x10000][4].startswith("past_key_values.layers[0].keys in test_each_layout_held_by_a_local (test_kv_cache.py:")


def test_a_cache_inside_a_model_output_and_a_module():
    out = {"logits": Tensor(0x60000), "past_key_values": DynamicCache(pairs(0x70000))}  # noqa: F841
    model = Module()  # noqa: F841
    model.cache = StaticCache(pairs(0x80000))
    n = walk()
    check(n, 0x70000, "out['past_key_values']")
    check(n, 0x80000, "model.cache")
    assert n[0x80000][5] == "model"


def test_nested_in_a_server_object():
    class Session:
        def __init__(self, cache):
            self.cache = cache

    class Server:
        def __init__(self):
            self.sessions = {"a": Session(DynamicCache(pairs(0x90000)))}

    server = Server()  # noqa: F841
    n = walk()
    check(n, 0x90000, "server.sessions['a'].cache")


def test_kv_outranks_a_local_and_not_a_parameter():
    cache = DynamicCache(pairs(0xA0000))
    key_states = cache.layers[1].keys  # noqa: F841  the attention's local for the same storage
    n = walk()
    check(n, 0xA0000, "cache")


def test_what_is_not_a_kv_cache():
    images = [(kv(0xB0000), kv(0xB0080))]  # noqa: F841  pairs of 4-D tensors under another name
    layers = Layers(pairs(0xC0000))  # noqa: F841
    n = walk()
    assert n[0xB0000][3] == "local" and n[0xB0000][4].startswith("images[0][0] in ")
    assert n[0xC0000][3] == "local" and n[0xC0000][4].startswith("layers.layers[0].k in ")
