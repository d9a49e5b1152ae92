"""The tensor walk's holder routes (vramscope/agent/_holders.py, _globals.py) on a
fake torch: tensors reachable only from an imported module's globals (a dict,
a class attribute, a closure's cell, functools.lru_cache entries, a server
object nesting them), objects nested in locals, non-persistent buffers, and
the module an activation is attributed to when the weights are frozen. Real
torch: test_tensors_torch.py (on CPU in make test, on CUDA on the H200)."""
import gc
import importlib
import sys
import textwrap
import types
import weakref

import pytest

from test_tensors import AccumulateGrad, Module, Node, Parameter, Tensor, fake_torch, names_by_ptr
from vramscope.agent import _tensors

HELPER = textwrap.dedent('''\
    """An attention-mask helper that caches what it builds, five ways."""
    import functools

    FACTORY = None
    _CACHE = {}


    def mask(n, offset):
        key = (16, n, offset)
        if key not in _CACHE:
            _CACHE[key] = FACTORY(n)
        return _CACHE[key]


    class Rotary:
        scale = 1.0
        _tables = {}

        @classmethod
        def table(cls, n):
            return cls._tables.setdefault((n, cls.scale), FACTORY(n))


    def _counter():
        kept = []

        def keep(n):
            kept.append(FACTORY(n))
        return keep


    keep = _counter()


    @functools.lru_cache(maxsize=None)
    def unbounded(n):
        return FACTORY(n)


    @functools.lru_cache(maxsize=16)
    def bounded(n):
        return FACTORY(n)


    class Layer:
        __slots__ = ("k", "v")

        def __init__(self, k, v):
            self.k, self.v = k, v


    class Server:
        def __init__(self):
            self.sessions = {}

        def open(self, name, layers):
            self.sessions[name] = [Layer(FACTORY(layers * 100 + i), FACTORY(layers * 100 + i + 50))
                                   for i in range(layers)]


    SERVER = Server()
''')


class Maker:
    """Fake CUDA tensors at distinct addresses, 1 KiB per unit of n; the
    tensors made, by weak reference (the walk would find them here first)."""

    def __init__(self, base):
        self.next, self.refs = base, []

    def __call__(self, n):
        self.next += 0x100000
        t = Tensor(self.next, 1024 * (1 + n % 7), shape=(16, n))
        self.refs.append(weakref.ref(t))
        return t

    @property
    def made(self):
        return [r() for r in self.refs]


@pytest.fixture
def helper(tmp_path, monkeypatch):
    (tmp_path / "maskcache.py").write_text(HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("maskcache")
    mod.FACTORY = Maker(0x7000000)
    yield mod
    sys.modules.pop("maskcache", None)


def walk():
    gc.collect()  # fakes of earlier tests left in reference cycles would be walked too
    res = _tensors.name_tensors(fake_torch)
    return res, names_by_ptr(res)


def line_of(mod, text):
    return next(i for i, s in enumerate(open(mod.__file__), 1) if s.startswith(text))


def ptr(t):
    return t.untyped_storage().data_ptr()


def test_a_module_global_dict_in_an_imported_helper(helper):
    for n in (512, 640, 768):
        helper.mask(n, 4821)
    res, n = walk()
    e = n[ptr(helper._CACHE[(16, 640, 4821)])]
    assert e[3:5] == ["global", "maskcache._CACHE[(16, 640, 4821)]"], e
    assert e[6] == helper.__file__ and e[7] == line_of(helper, "_CACHE = {}")
    assert e[8] == [16, 640]
    assert res["routes"]["global"] == 3 and not res["truncated"]


def test_a_class_attribute(helper):
    helper.Rotary.table(1024)
    _, n = walk()
    e = n[ptr(helper.Rotary._tables[(1024, 1.0)])]
    assert e[3:5] == ["global", "maskcache.Rotary._tables[(1024, 1.0)]"], e
    assert e[7] == line_of(helper, "    _tables = {}")


def test_a_closure_cell(helper):
    helper.keep(3)
    helper.keep(4)
    _, n = walk()
    a, b = helper.FACTORY.made
    assert n[ptr(b)][3:5] == ["global", "maskcache.keep.<locals>.kept[1]"]
    assert n[ptr(a)][7] == line_of(helper, "    def keep(n):")


@pytest.mark.parametrize("fn", ["unbounded", "bounded"])
def test_lru_cache_entries(helper, fn):
    for k in (7, 9):
        getattr(helper, fn)(k)
    _, n = walk()
    t7, t9 = helper.FACTORY.made
    assert n[ptr(t9)][3:5] == ["global", "maskcache.%s.<lru_cache>[9]" % fn], n[ptr(t9)]
    assert n[ptr(t7)][4] == "maskcache.%s.<lru_cache>[7]" % fn
    assert n[ptr(t7)][7] == line_of(helper, "def %s(n):" % fn) - 1  # the decorator's line, as Python records it


def test_a_server_nesting_sessions_of_layer_objects(helper):
    helper.SERVER.open("alice", 3)
    helper.SERVER.open("bob", 2)
    _, n = walk()
    bob1 = helper.SERVER.sessions["bob"][1]
    assert n[ptr(bob1.v)][3:5] == ["global", "maskcache.SERVER.sessions['bob'][1].v"]
    assert n[ptr(bob1.k)][7] == line_of(helper, "SERVER = Server()")
    assert sum(e[4].startswith("maskcache.SERVER.sessions[") for e in n.values()) == 10


def test_a_cache_object_nesting_per_layer_objects_in_a_local():
    class Entry:
        def __init__(self, k):
            self.tensors = {"k": k}

    class Store:
        def __init__(self):
            self.layers = [Entry(Tensor(0x9100000 + i * 0x1000)) for i in range(4)]

    store = Store()  # noqa: F841  three levels: list, object, dict
    _, n = walk()
    e = n[0x9103000]
    assert e[3] == "local" and e[4].startswith("store.layers[3].tensors['k'] in test_a_cache_object_nesting"), e


def test_nothing_unnamed_no_holder_walk(monkeypatch):
    """The second part runs only for tensors the first left unnamed."""
    calls = []
    monkeypatch.setattr(_tensors._globals, "holders", lambda w, frames: calls.append(1))
    gc.collect()
    m = Module()
    m._parameters["w"] = Parameter(0x9200000)
    _tensors.name_tensors(fake_torch)
    assert calls == []
    kept = {"a": {"b": Tensor(0x9300000)}}  # noqa: F841  two levels down: the first part does not see it
    _tensors.name_tensors(fake_torch)
    assert calls == [1]


def test_non_persistent_buffers():
    """register_buffer(persistent=False) keeps the buffer in _buffers and its
    name in _non_persistent_buffers_set, as torch does."""
    gc.collect()
    model = Module(rope=Module())
    rope = model._modules["rope"]
    rope._buffers["inv_freq"] = Tensor(0x9400000)
    rope._non_persistent_buffers_set = {"inv_freq"}
    _, n = walk()
    assert n[0x9400000][3:6] == ["buffer", "model.rope.inv_freq", "model.rope"]


def build_graph(w_attn, w_fc, lora_a):
    x = Tensor(0x9600000)
    lora = Node("MmBackward0", [AccumulateGrad(lora_a)], self=x)
    base = Node("AddmmBackward0", [], mat1=x, mat2=w_attn)
    add = Node("AddBackward0", [lora, base])
    fc = Node("AddmmBackward0", [add], mat1=Tensor(0x9610000), mat2=w_fc)
    g1, g2 = Tensor(0x9620000), Tensor(0x9630000)
    gelu = Node("MulBackward0", [Node("TanhBackward0", [Node("PowBackward0", [fc], self=g1)], result=g2)], other=g2)
    return Tensor(0x9640000, grad_fn=gelu)


def test_activations_of_a_frozen_layer_name_its_module():
    """peft LoRA on GPT-2: c_attn's and c_fc's weights are frozen (no
    AccumulateGrad); only lora_A/lora_B train. The GELU's nodes above c_fc's
    addmm belong to c_fc, whose frozen weight the addmm saved; lora_A is
    further down the graph."""
    gc.collect()
    w_attn, w_fc, lora_a = Parameter(0x9500000), Parameter(0x9510000), Parameter(0x9520000)
    attn = Module(c_attn=Module(lora_A=Module(default=Module())))
    mlp = Module(c_fc=Module())
    model = Module(h=Module(**{"0": Module(attn=attn, mlp=mlp)}))
    attn._modules["c_attn"]._parameters["weight"] = w_attn
    attn._modules["c_attn"]._modules["lora_A"]._modules["default"]._parameters["weight"] = lora_a
    mlp._modules["c_fc"]._parameters["weight"] = w_fc
    out = build_graph(w_attn, w_fc, lora_a)  # noqa: F841  saved tensors no local holds
    _, n = walk()
    del model
    for p in (0x9610000, 0x9620000, 0x9630000):
        assert n[p][3] == "activation" and n[p][5] == "model.h.0.mlp.c_fc", n[p]
    assert n[0x9620000][4] == "saved by PowBackward0 in model.h.0.mlp.c_fc"
    assert n[0x9600000][5] in ("model.h.0.attn.c_attn", "model.h.0.attn.c_attn.lora_A.default")  # saved by both


def build_autocast_graph(layers):
    """Two GPT-2 blocks' ln_2 -> c_fc -> GELU under autocast: ln_2 saves its
    own (fp32) weight; c_fc's addmm saves a bf16 copy of the frozen weight,
    a tensor outside the graph with the weight's shape but its own storage."""
    top = None
    for i, (ln_w, fc_w) in enumerate(layers):
        ln = Node("NativeLayerNormBackward0", [top] if top else [], input=Tensor(0x9700000 + i * 0x10000), weight=ln_w)
        cast = Tensor(0x9800000 + i * 0x10000, shape=fc_w.shape)
        cast.requires_grad = False
        fc = Node("AddmmBackward0", [ln], mat2=cast)
        top = Node("MulBackward0", [fc], other=Tensor(0x9900000 + i * 0x10000))
    return Tensor(0x9A00000, grad_fn=top)


def test_activations_under_autocast_name_the_frozen_layer():
    gc.collect()
    blocks = {}
    layers = []
    for i in range(2):
        ln_2, c_fc = Module(), Module()
        ln_2._parameters["weight"] = Parameter(0x9B00000 + i * 0x10000, shape=(768,))
        c_fc._parameters["weight"] = Parameter(0x9C00000 + i * 0x10000, shape=(768, 3072))
        blocks[str(i)] = Module(ln_2=ln_2, mlp=Module(c_fc=c_fc))
        layers.append((ln_2._parameters["weight"], c_fc._parameters["weight"]))
    model = Module(h=Module(**blocks))
    out = build_autocast_graph(layers)  # noqa: F841
    _, n = walk()
    del model
    for i in range(2):
        gelu = n[0x9900000 + i * 0x10000]
        assert gelu[4:6] == ["saved by MulBackward0 in model.h.%d.mlp.c_fc" % i, "model.h.%d.mlp.c_fc" % i], gelu
        assert n[0x9800000 + i * 0x10000][5] == "model.h.%d.mlp.c_fc" % i
        assert n[0x9700000 + i * 0x10000][5] == "model.h.%d.ln_2" % i


def test_an_unreadable_object_is_passed_over(monkeypatch):
    """An object the holder walk fails to read is counted, and the walk goes
    on to the next (the OOM observer must not lose the other names)."""
    class Odd:
        pass

    real = _tensors._holders._children

    def children(w, v, t, path, home):
        if t is Odd:
            raise ValueError("unreadable")
        return real(w, v, t, path, home)
    monkeypatch.setattr(_tensors._holders, "_children", children)
    kept = {"a": {"odd": Odd(), "t": Tensor(0x9D00000)}}  # noqa: F841
    res, n = walk()
    assert n[0x9D00000][4].startswith("kept['a']['t'] in ")
    assert res["routes"]["unreadable"] >= 1 and not res["truncated"]


class Shady(dict):
    """User code that the walk must never run."""

    def items(self):
        raise AssertionError("ran items()")

    def __iter__(self):
        raise AssertionError("ran __iter__()")


class ShadyList(list):
    def __iter__(self):
        raise AssertionError("ran __iter__()")

    def __len__(self):
        raise AssertionError("ran __len__()")


def test_no_user_code_runs():
    """Subclasses of dict, list and tuple are read through the builtin types'
    own methods: their overrides (user code) never run."""
    past = Shady(a=Tensor(0x9E20000))
    past[ShadyTuple((1, 2))] = ShadyList([(Tensor(0x9E00000, shape=(1, 2, 3, 4)), Tensor(0x9E10000, shape=(1, 2, 3, 4)))])
    res, n = walk()
    assert "unreadable" not in res["routes"], res["routes"]
    assert n[0x9E20000][4].startswith("past['a'] in ")
    assert n[0x9E10000][3] == "kv_cache" and n[0x9E10000][4].startswith("past[(1, 2)][0][1] in "), n[0x9E10000]


class ShadyTuple(tuple):
    def __len__(self):
        raise AssertionError("ran __len__()")

    def __iter__(self):
        raise AssertionError("ran __iter__()")


def test_a_slow_route_leaves_the_globals_time(helper, monkeypatch):
    """Locals holding a huge object graph use at most half the time left:
    the globals still get theirs (the walk says it was cut short)."""
    def endless(w, frames):
        while True:
            w.tick()
    monkeypatch.setattr(_tensors._globals, "_locals", endless)
    monkeypatch.setattr(_tensors, "_CHECK_EVERY", 1)
    helper.mask(512, 1)
    gc.collect()
    res = _tensors.name_tensors(fake_torch, budget_s=0.4)
    n = names_by_ptr(res)
    assert n[ptr(helper._CACHE[(16, 512, 1)])][4] == "maskcache._CACHE[(16, 512, 1)]"
    assert res["truncated"] is True


def test_a_class_imported_elsewhere_first(tmp_path, monkeypatch):
    """class_cache.py on the H200 (docs/oom-naming.md): the program, whose
    globals (__main__'s) are walked first, imports the class (`from postable
    import PositionTable`); the class is entered from its own module."""
    (tmp_path / "maskcache.py").write_text(HELPER)
    (tmp_path / "trainer.py").write_text("from maskcache import Rotary, bounded, keep  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "__main__", importlib.import_module("trainer"))  # walked first
    helper = sys.modules["maskcache"]
    try:
        helper.FACTORY = Maker(0x7800000)
        helper.Rotary.table(2048)
        helper.bounded(3)
        helper.keep(5)
        _, n = walk()
        table, lru, kept = helper.FACTORY.made
        assert n[ptr(table)][4] == "maskcache.Rotary._tables[(2048, 1.0)]"
        assert n[ptr(lru)][4] == "maskcache.bounded.<lru_cache>[3]"
        assert n[ptr(kept)][4] == "maskcache.keep.<locals>.kept[0]"
    finally:
        sys.modules.pop("maskcache", None)
        sys.modules.pop("trainer", None)


def test_a_trainable_weight_behind_a_cast_names_its_module():
    """Under autocast a trainable weight reaches the matmul through a cast
    and a transpose (ToCopyBackward0, TBackward0): the matmul's module is the
    weight's, not that of its input (listed first) from the layer before."""
    gc.collect()
    w_prev, w_proj = Parameter(0x9F00000), Parameter(0x9F10000)
    model = Module(prev=Module(), proj=Module())
    model._modules["prev"]._parameters["weight"] = w_prev
    model._modules["proj"]._parameters["weight"] = w_proj
    out = build_cast_graph(w_prev, w_proj)  # noqa: F841
    _, n = walk()
    del model
    assert n[0x9F30000][4:6] == ["saved by MmBackward0 in model.proj", "model.proj"], n[0x9F30000]
    assert n[0x9F20000][5] == "model.prev"


def build_cast_graph(w_prev, w_proj):
    prev = Node("MulBackward0", [AccumulateGrad(w_prev)], other=Tensor(0x9F20000))
    weight = Node("TBackward0", [Node("ToCopyBackward0", [AccumulateGrad(w_proj)])])
    mm = Node("MmBackward0", [prev, weight], self=Tensor(0x9F30000))
    return Tensor(0x9F40000, grad_fn=mm)


class Linear(Module):
    pass


def test_cast_weights_by_how_each_module_uses_them():
    """GPT-2's MLP: c_fc's (128, 512) weight and c_proj's (512, 128) are
    Conv1D weights, used as they are; an nn.Linear's (64, 32) weight is used
    transposed. Each saved cast copy names its own module."""
    gc.collect()
    torch = types.SimpleNamespace(Tensor=Tensor, nn=types.SimpleNamespace(Module=Module, Linear=Linear),
                                  optim=fake_torch.optim)
    c_fc, c_proj, lin = Module(), Module(), Linear()
    c_fc._parameters["weight"] = Parameter(0xA100000, shape=(128, 512))
    c_proj._parameters["weight"] = Parameter(0xA110000, shape=(512, 128))
    lin._parameters["weight"] = Parameter(0xA120000, shape=(64, 32))
    model = Module(h=Module(**{"0": Module(mlp=Module(c_fc=c_fc, c_proj=c_proj), lin=lin)}))
    out = build_casts([(128, 512), (32, 64)])  # noqa: F841
    res = _tensors.name_tensors(torch)
    del model
    n = names_by_ptr(res)
    assert n[0xA200000][5] == "model.h.0.mlp.c_fc", n[0xA200000]
    assert n[0xA200001][5] == "model.h.0.lin", n[0xA200001]


def build_casts(shapes):
    nodes = []
    for i, shape in enumerate(shapes):
        cast = Tensor(0xA300000 + i, shape=shape)
        cast.requires_grad = False
        nodes.append(Node("MmBackward0", [], mat2=cast, self=Tensor(0xA200000 + i)))
    return Tensor(0xA400000, grad_fn=Node("AddBackward0", nodes))
