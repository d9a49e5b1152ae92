"""The tensor-naming walk (vramscope/agent/_tensors.py) on a fake torch: modules,
optimizers, frame locals and an autograd graph built from small classes that
have the attributes real torch gives them (the real path runs on the H200:
examples/oom/, docs/oom-naming.md)."""
import functools
import gc
import types

import pytest

from vramscope.agent import _tensors


class Storage:
    def __init__(self, ptr, n):
        self.ptr, self.n = ptr, n

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self.n


class Tensor:
    def __init__(self, ptr, n=1024, dev=0, cuda=True, grad_fn=None, shape=None):
        self._st, self.is_cuda, self._dev, self.grad_fn, self.grad = Storage(ptr, n), cuda, dev, grad_fn, None
        self.shape = tuple(shape) if shape is not None else (n // 4,)

    def untyped_storage(self):
        return self._st

    def get_device(self):
        return self._dev if self.is_cuda else -1


class Parameter(Tensor):
    pass


class Module:
    def __init__(self, **children):
        self._parameters, self._buffers, self._modules = {}, {}, dict(children)
        self.training = True


class Optimizer:
    def __init__(self, state):
        self.state = state


class Node:
    """An autograd node: next_functions, name(), _saved_* attributes; one
    class per node name, as torch has (MulBackward0)."""
    classes = {}

    def __init__(node, name, nexts=(), **saved):
        self = node
        if type(self) is Node:
            self.__class__ = Node.classes.setdefault(name, type(name, (Node,), {}))
        self._name, self.next_functions = name, tuple((n, 0) for n in nexts)
        for k, v in saved.items():
            setattr(self, "_saved_" + k, v)

    def name(self):
        return self._name


class AccumulateGrad(Node):
    def __init__(self, variable):
        super().__init__("torch::autograd::AccumulateGrad")
        self.variable = variable


class Freed(Node):
    @property
    def _saved_self(self):
        raise RuntimeError("Trying to backward through the graph a second time")


fake_torch = types.SimpleNamespace(Tensor=Tensor, nn=types.SimpleNamespace(Module=Module),
                                   optim=types.SimpleNamespace(Optimizer=Optimizer))


def build():
    """A two-layer model with a gradient, a buffer, a cache attribute, an
    optimizer with state, and an autograd graph: mm (saves its input) ->
    gelu (saves the mm output) on layer 0's weight."""
    w0, w1 = Parameter(0x1000, 4096), Parameter(0x2000, 4096)
    l0, l1 = Module(), Module()
    l0._parameters["weight"], l1._parameters["weight"] = w0, w1
    l1._buffers["mask"] = Tensor(0x3000, 512)
    l1.cache = {"k512": Tensor(0x3800, 256)}
    w0.grad = Tensor(0x4000, 4096)
    model = Module(layers=Module(**{"0": l0, "1": l1}))
    opt = Optimizer({w0: {"exp_avg": Tensor(0x5000, 4096), "exp_avg_sq": Tensor(0x6000, 4096), "step": 3}})
    x, h = Tensor(0x7000, 8192), Tensor(0x8000, 8192)
    mm = Node("MmBackward0", [AccumulateGrad(w0)], self=x)
    gelu = Node("GeluBackward0", [mm], self=h)
    freed = Freed("AddBackward0", [gelu])
    return model, opt, freed


def names_by_ptr(result):
    return {e[1]: e for e in result["entries"]}


def run_step(model, opt, graph_top):
    logits = Tensor(0x9000, 65536, grad_fn=graph_top)
    outs = [Tensor(0xA000, 128), Tensor(0xB000, 128)]
    weight_again = model._modules["layers"]._modules["0"]._parameters["weight"]  # noqa: F841 a local naming a parameter
    on_cpu = Tensor(0xC000, cuda=False)  # noqa: F841
    gc.collect()  # models of earlier tests left in reference cycles would be walked too
    return _tensors.name_tensors(fake_torch), (logits, outs)


def test_names_every_route():
    model, opt, top = build()
    res, _ = run_step(model, opt, top)
    n = names_by_ptr(res)
    assert res["version"] == 1 and not res["truncated"], res
    assert n[0x1000][3:6] == ["parameter", "model.layers.0.weight", "model.layers.0"]
    assert n[0x1000][2] == 4096 and n[0x1000][0] == 0
    assert n[0x4000][3:5] == ["gradient", "model.layers.0.weight.grad"]
    assert n[0x3000][3:5] == ["buffer", "model.layers.1.mask"]
    assert n[0x3800][3:5] == ["attribute", "model.layers.1.cache['k512']"]
    assert n[0x5000][3:6] == ["optimizer_state", "exp_avg of model.layers.0.weight", "model.layers.0"]
    assert n[0x6000][4] == "exp_avg_sq of model.layers.0.weight"
    loc = n[0x9000]
    assert loc[3] == "local" and loc[4].startswith("logits in run_step (test_tensors.py:")
    assert loc[6].endswith("test_tensors.py") and loc[7] > 0
    assert n[0xB000][4].startswith("outs[1] in run_step")
    assert n[0xA000][3] == "local"
    # Activations saved for backward: the mm's input names the module of its
    # weight; gelu's saved input inherits the module from the mm below it.
    assert n[0x7000][3:6] == ["activation", "saved by MmBackward0 in model.layers.0", "model.layers.0"]
    assert n[0x8000][3:5] == ["activation", "saved by GeluBackward0 in model.layers.0"]
    assert 0xC000 not in n, "CPU tensors are not named"
    assert res["routes"]["parameter"] == 2 and res["objects"] > 0


def test_a_parameter_stays_a_parameter_whatever_else_holds_it():
    model, opt, top = build()
    res, _ = run_step(model, opt, top)
    assert names_by_ptr(res)[0x1000][3] == "parameter"  # also the local weight_again


def test_root_module_without_a_variable_is_named_by_its_class():
    def inner():
        m = Module()
        m._parameters["w"] = Parameter(0xD000)
        holder = [m]
        del m
        return _tensors.name_tensors(fake_torch), holder
    res, _ = inner()
    assert names_by_ptr(res)[0xD000][4] == "Module.w"


def test_out_of_time_is_truncated_not_raised(monkeypatch):
    model, opt, top = build()
    monkeypatch.setattr(_tensors, "_CHECK_EVERY", 1)
    res = _tensors.name_tensors(fake_torch, budget_s=-1.0)
    assert res["truncated"] is True
    assert isinstance(res["entries"], list)


def test_a_torch_it_does_not_know_never_raises():
    res = _tensors.name_tensors(types.SimpleNamespace(Tensor=Tensor))  # no nn, no optim
    assert res["truncated"] is True and "error" in res["routes"]
    assert _tensors.name_tensors(None) is not None  # even nonsense: a result, not an exception


@pytest.mark.parametrize("limit", [1, 3])
def test_entries_are_bounded(monkeypatch, limit):
    model, opt, top = build()
    monkeypatch.setattr(_tensors, "MAX_ENTRIES", limit)
    res, _ = run_step(model, opt, top)
    assert len(res["entries"]) == limit and res["truncated"] is True


def test_a_local_that_backward_saves_is_an_activation_with_its_local_name():
    def step():
        h = Tensor(0xE000, 4096)
        top = Node("GeluBackward0", (), self=h)
        out = Tensor(0xF000, 4096, grad_fn=top)  # noqa: F841
        return _tensors.name_tensors(fake_torch)
    e = names_by_ptr(step())[0xE000]
    assert e[3] == "activation" and e[4].startswith("h in step (test_tensors.py:")


class Attention(Module):
    def forward(self, x):
        y = x
        return y


class Block(Module):
    pass  # inherits forward from Module: none; its child's forward is located


def _returns_tuple(fn):
    @functools.wraps(fn)
    def wrapper(self, *a, **k):
        return fn(self, *a, **k)
    return wrapper


class Decorated(Module):
    @_returns_tuple  # as transformers wraps GPT2Model.forward: the frames run the inner lines
    def forward(self, x):
        y = x
        return y


def test_records_forward_methods():
    """Where each module class's forward is, with its qualified name, once per
    class: the engine labels frames in those lines "Attention.forward"."""
    import inspect
    gc.collect()  # models of earlier tests left in reference cycles would be walked too
    model = Module(h=Module(**{"0": Block(attn=Attention()), "1": Block(attn=Attention())}), body=Decorated())
    res = _tensors.name_tensors(fake_torch)
    del model
    lines, first = inspect.getsourcelines(Attention.forward)
    want = [__file__, first, first + len(lines) - 1, "Attention.forward", ["model.h.*.attn"]]
    assert want in res["methods"], res["methods"]
    lines, first = inspect.getsourcelines(inspect.unwrap(Decorated.forward))
    want = [__file__, first, first + len(lines) - 1, "Decorated.forward", ["model.body"]]
    assert want in res["methods"], res["methods"]
    assert sum(m[3] == "Attention.forward" for m in res["methods"]) == 1
    assert all(m[3].endswith(".forward") for m in res["methods"])


def test_forward_descriptors_never_run():
    """A forward that is not a plain function (a property, a builtin) is not
    located, and the walk runs none of its code."""
    ran = []

    class Lazy(Module):
        @property
        def forward(self):
            ran.append(1)
            return None

    gc.collect()  # models of earlier tests left in reference cycles would be walked too
    model = Module(lazy=Lazy(), attn=Attention())
    res = _tensors.name_tensors(fake_torch)
    del model
    assert ran == []
    assert not any(m[3].startswith("Lazy") for m in res["methods"])
    assert any(m[3] == "Attention.forward" and m[4] == ["model.attn"] for m in res["methods"]), res["methods"]
