"""The failing step's inputs from the stack (vramscope/agent/_rootcall.py):
a root call read back from the frame that made it, without running any of
the program's code, and the root call's own frame."""
import collections
import sys

from vramscope.agent import _rootcall


class Model:
    """A module as _rootcall sees one: called through __call__."""

    def __init__(self):
        self.seen = None
        self._modules = {}

    def __call__(self, *args, **kwargs):
        self.seen = (args, kwargs)
        return hook(self)


class T:
    calls = [0]  # the program's calls of to() and cuda(): read_back makes none

    def __init__(self, *shape):
        self.shape = shape

    def to(self, *_a, **_k):
        T.calls[0] += 1
        return self

    cuda = to


class Batch(collections.UserDict):
    """transformers' BatchEncoding is a UserDict."""


class Trainer:
    def __init__(self, model):
        self._modules = {"model": model}  # torch.nn.Module keeps its children there

    def __getattr__(self, name):  # as torch.nn.Module's
        try:
            return self.__dict__["_modules"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def boom(self):
        raise AssertionError("read_back ran a property")


hook = None  # what the model's call runs: the test's probe


def _site(fn):
    """Run fn; at the model's call note the site (caller's code and line) as
    the agent's root_pre does, then return (site, the frame fn left, fn's result)."""
    global hook
    codes = frozenset({id(Model.__call__.__code__)})
    got = {}

    def probe(model):
        got["site"] = _rootcall.caller(sys._getframe(), codes)

    hook = probe
    try:
        out = fn()
    finally:
        hook = None
    return got["site"], out


def test_a_call_of_names_subscripts_attributes_and_shape_keeping_methods_is_read_back():
    model = Model()
    trainer = Trainer(model)
    batch = Batch(input_ids=T(4, 128), labels=T(4, 128))
    extra = {"attention_mask": T(4, 128)}
    ids = [T(4, 128)]

    def loop():
        out = trainer.model(ids[0].to("cuda"), *ids, mask=batch["input_ids"].cuda(non_blocking=True), **extra)
        frame = sys._getframe()  # after the call, as an out-of-memory error in backward
        return frame, out

    (code, line), (frame, _out) = _site(loop)
    assert code is loop.__code__
    calls = T.calls[0]
    args, kwargs = _rootcall.read_back(frame, line, [model])
    assert T.calls[0] == calls
    assert [a.shape for a in args] == [(4, 128), (4, 128)]
    assert sorted(kwargs) == ["attention_mask", "mask"] and kwargs["mask"] is batch["input_ids"]


def test_what_cannot_be_read_without_running_code_gives_none():
    model = Model()
    trainer = Trainer(model)

    def loop():
        model(trainer.boom if False else T(2, 2))  # a conditional: not read
        return sys._getframe()

    (_code, line), frame = _site(loop)
    assert _rootcall.read_back(frame, line, [model]) is None


def test_the_first_roots_call_where_a_line_calls_two():
    model, loss = Model(), Model()
    x, y = T(8, 16), T(8)

    def loop():
        loss(model(x), y)
        return sys._getframe()

    (_code, line), frame = _site(loop)
    args, kwargs = _rootcall.read_back(frame, line, [model, loss])
    assert args == (x,) and kwargs == {}


def test_at_oom_inside_the_call_its_frame_holds_the_arguments():
    model = Model()
    codes = frozenset({id(Model.__call__.__code__)})
    big = T(64, 1024)
    got = {}
    global hook

    def inside(m):
        got["in"] = _rootcall.at_oom([model], codes, None, None)

    hook = inside
    try:
        model(big, labels=big)
    finally:
        hook = None
    assert got["in"] == ((big,), {"labels": big})


def test_at_oom_after_the_call_reads_it_back_and_before_it_finds_none():
    """In the frame that calls the root, past the call's line (backward) the
    call is read back; before it (the next batch on its way) the step's
    inputs were not passed yet: none, not the last step's."""
    model = Model()
    codes = frozenset({id(Model.__call__.__code__)})
    global hook
    sites = []
    hook = lambda m: sites.append(_rootcall.caller(sys._getframe(), codes))  # noqa: E731
    x = T(4, 128)
    out = []
    try:
        for i in range(2):
            if i == 1:  # before the call
                out.append(_rootcall.at_oom([model], codes, sites[0], None))
                break
            model(x)
            out.append(_rootcall.at_oom([model], codes, sites[0], None))  # after it
    finally:
        hook = None
    assert out == [((x,), {}), None]
