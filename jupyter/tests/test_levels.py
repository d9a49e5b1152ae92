"""The agent's per-step levels (vramscope.agent._levels) with fakes: what a step is
(train, eval, forward), the shapes it keeps, the ring's bound, what goes to
the daemon, and the peak wrappers. The same code runs against real torch on
the GPU machine (examples/oom/road.py, docs/road-to-oom.md)."""
import json
import math
import os
import subprocess
import time
import types

import pytest

from conftest import PKG_PARENT, torch_python
from vramscope.agent import _levels


class T:
    """A tensor as _levels sees one: a shape and a dtype."""

    def __init__(self, *shape):
        self.shape, self.dtype = shape, "int64"


class FakeReader:
    def __init__(self, index=0):
        self.index = index
        self.alloc, self.res, self.peak, self.rpeak = 100, 200, 150, 250
        self.reads = 0
        self.fail = False

    def read(self):
        if self.fail:
            raise RuntimeError("no stats")
        self.reads += 1
        out = (self.alloc, self.res, self.peak, self.rpeak)
        self.peak, self.rpeak = self.alloc, self.res  # reset
        return out


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def make(grad=True):
    clock = Clock()
    state = {"grad": grad, "rec": False}
    lv = _levels.Levels(reader=FakeReader(), recording=lambda: state["rec"], grad_enabled=lambda: state["grad"],
                        clock=clock, wall=lambda: 1700000000.5 + clock.t)
    return lv, clock, state


def train_step(lv, clock, batch, seq, dt=0.05):
    lv.root_pre(None, (T(batch, seq),), {"labels": T(batch, seq)})
    clock.t += dt
    lv.root_post(None, (), None)
    lv.on_optimizer_step()


def test_train_steps_keep_levels_shapes_and_durations():
    lv, clock, state = make()
    train_step(lv, clock, 8, 256)
    lv.reader.alloc, lv.reader.peak = 120, 900
    state["rec"] = True
    train_step(lv, clock, 16, 1024, dt=0.2)
    got = lv.drain()
    assert [e["step"] for e in got] == [0, 1]
    assert got[0]["inputs"] == [[8, 256], [8, 256]] and got[1]["inputs"] == [[16, 1024], [16, 1024]]
    assert got[0]["dur_us"] == 50000 and got[1]["dur_us"] == 200000  # the first from its first root call
    assert (got[1]["allocated"], got[1]["reserved"], got[1]["peak"]) == (120, 200, 900)
    assert got[0]["phase"] == got[1]["phase"] == "train"
    assert "recorded" not in got[0] and got[1]["recorded"] is True
    assert (got[0]["unix_ms"], got[1]["unix_ms"]) == (1700000000550, 1700000000750)  # the wall clock at each end
    assert lv.drain() == []  # sent once
    assert len(lv.ring) == 2  # kept for snapshots


def test_gradient_accumulation_is_one_step_with_the_first_calls_shapes():
    lv, clock, _ = make()
    for seq in (256, 512, 128):
        lv.root_pre(None, (T(4, seq),), None)
        lv.root_post(None, (), None)
    lv.on_optimizer_step()
    got = lv.drain()
    assert len(got) == 1 and got[0]["inputs"] == [[4, 256]]


def test_eval_between_training_steps_is_its_own_step():
    lv, clock, state = make()
    train_step(lv, clock, 8, 256)
    state["grad"] = False
    lv.root_pre(None, (T(32, 256),), None)
    lv.root_post(None, (), None)
    state["grad"] = True
    train_step(lv, clock, 8, 256)
    assert [(e["phase"], e["inputs"][0]) for e in lv.drain()] == [
        ("train", [8, 256]), ("eval", [32, 256]), ("train", [8, 256])]


def test_program_without_optimizer_steps_counts_root_calls():
    lv, clock, state = make(grad=False)
    for n in range(3):
        lv.root_pre(None, (T(1, 10 + n),), None)
        lv.root_post(None, (), None)
    got = lv.drain()
    assert [e["phase"] for e in got] == ["forward"] * 3 and got[2]["inputs"] == [[1, 12]]
    # with gradients on and no optimizer step: steps only after PROBE_CALLS calls
    state["grad"] = True
    for _ in range(_levels.PROBE_CALLS + 2):
        lv.root_pre(None, (T(1, 5),), None)
        lv.root_post(None, (), None)
    assert len(lv.drain()) == 2


def test_a_root_called_inside_a_root_counts_once():
    lv, clock, state = make(grad=False)
    lv.root_pre(None, (T(2, 3),), None)
    lv.root_pre(None, (T(9, 9),), None)  # the same module reached from inside
    lv.root_post(None, (), None)
    assert lv.drain() == []
    lv.root_post(None, (), None)
    got = lv.drain()
    assert len(got) == 1 and got[0]["inputs"] == [[2, 3]]


def test_oom_marks_the_failing_step_and_a_raised_forward_resets_nesting():
    lv, clock, state = make()
    train_step(lv, clock, 8, 256)
    lv.root_pre(None, (T(16, 1024),), None)  # the forward raises: no post-hook
    lv.reader.alloc = 9 << 30
    lv.on_oom()
    got = lv.drain()
    assert got[-1]["oom"] is True and got[-1]["inputs"] == [[16, 1024]] and got[-1]["allocated"] == 9 << 30
    assert got[-1]["phase"] == "train" and lv.in_root == 0


def test_a_failing_read_drops_the_levels_not_the_step():
    lv, clock, _ = make()
    lv.reader.fail = True
    train_step(lv, clock, 1, 1)
    got = lv.drain()
    assert (got[0]["allocated"], got[0]["peak"]) == (-1, -1) and lv.failed == 1


def test_the_ring_is_bounded_and_unsent_steps_are_counted(monkeypatch):
    monkeypatch.setattr(_levels, "RING", 5)
    lv, clock, _ = make()
    for _ in range(8):
        lv.on_optimizer_step()
    assert [e[0] for e in lv.ring] == [3, 4, 5, 6, 7]
    assert lv.dropped == 3
    assert [e["step"] for e in lv.drain(2)] == [3, 4]
    lv.resend()
    assert [e["step"] for e in lv.drain()] == [3, 4, 5, 6, 7]


def test_sent_steps_move_to_kept_and_drain_reads_both(monkeypatch):
    monkeypatch.setattr(_levels, "KEEP_RAW", 2)
    lv, clock, state = make()
    state["rec"] = True
    for n in range(10):
        train_step(lv, clock, 2, 3 + n, dt=0.01)
    got = lv.drain(3)
    assert [e["step"] for e in got] == [0, 1, 2] and len(lv.ring) == 2 and len(lv.kept) == 8
    got += lv.drain()
    assert [e["step"] for e in got] == list(range(10))
    assert all(e["dur_us"] == 10000 for e in got)  # across kept and ring alike
    assert [e["inputs"][0] for e in got] == [[2, 3 + n] for n in range(10)] and all(e["recorded"] for e in got)
    assert all(type(d) is int for s in lv.kept[0][6] for d in s)  # kept: plain tuples of ints
    lv.resend()
    assert [e["step"] for e in lv.drain()] == list(range(10)) and lv.dropped == 0


def test_steps_that_go_unsent_are_counted_once(monkeypatch):
    monkeypatch.setattr(_levels, "RING", 5)
    monkeypatch.setattr(_levels, "KEEP_RAW", 2)
    lv, clock, _ = make()
    for _ in range(8):
        lv.on_optimizer_step()
    assert lv.dropped == 3  # the ring held 5
    assert [e["step"] for e in lv.drain()] == [3, 4, 5, 6, 7] and len(lv.kept) == 3
    for _ in range(9):  # nothing drained: the ring drops 8..11 unsent
        lv.on_optimizer_step()
    assert [e["step"] for e in lv.drain()] == [12, 13, 14, 15, 16] and lv.dropped == 7
    lv.resend()
    assert [e["step"] for e in lv.drain()] == [12, 13, 14, 15, 16] and lv.dropped == 7


def test_the_recording_cell_is_read_at_each_step():
    cell = [False]
    lv = _levels.Levels(reader=FakeReader(), recording=cell, clock=Clock())
    lv.on_optimizer_step()
    cell[0] = True
    lv.on_optimizer_step()
    assert ["recorded" in e for e in lv.drain()] == [False, True]


def test_params_carry_the_cap():
    lv, clock, _ = make()
    lv.total = 1000
    assert lv.params([])["cap"] == 1000
    lv.fraction = lambda: 0.25
    assert lv.params([])["cap"] == 250 and lv.params([])["device"] == 0


def test_shapes_are_bounded_and_look_into_lists_and_dicts():
    assert _levels._shapes((T(1, 2), "x", 3), None) == ((1, 2),)
    assert _levels._shapes(([T(1), T(2)],), {"batch": {"ids": T(3, 4)}}) == ((1,), (2,), (3, 4))
    assert len(_levels._shapes(tuple(T(i) for i in range(9)), None)) == _levels.MAX_INPUTS
    assert _levels._shapes((), {}) is None


def fake_torch():
    peaks = {"alloc": 0, "res": 0}
    mem = types.SimpleNamespace(
        max_memory_allocated=lambda device=None: peaks["alloc"],
        max_memory_reserved=lambda device=None: peaks["res"],
        reset_peak_memory_stats=lambda device=None: peaks.update(alloc=0, res=0))
    for f in ("max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats"):
        getattr(mem, f).__name__ = f
    cuda = types.SimpleNamespace(memory=mem, _get_device_index=lambda d, optional=False: 0 if d is None else int(d))
    for f in ("max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats"):
        setattr(cuda, f, getattr(mem, f))
    return types.SimpleNamespace(cuda=cuda), peaks


def test_peak_wrappers_keep_the_programs_own_peak():
    torch, peaks = fake_torch()
    lv, clock, _ = make()
    _levels.wrap_peaks(torch, lv)
    try:
        lv.reader.peak, lv.reader.rpeak = 5000, 6000
        lv.on_optimizer_step()  # the agent's read resets the allocator's peak
        peaks["alloc"] = 300  # the next step's peak so far
        assert torch.cuda.max_memory_allocated() == 5000
        assert torch.cuda.memory.max_memory_reserved(0) == 6000
        assert torch.cuda.max_memory_allocated(1) == 300  # another device: torch's own
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == 0
    finally:
        _levels.unwrap_peaks()
    assert torch.cuda.max_memory_allocated.__name__ == "max_memory_allocated"
    assert not getattr(torch.cuda.max_memory_allocated, "__vramscope__", False)


def test_counters_peak_is_the_programs_own_after_the_reads_reset_it():
    """agent.torch's max_allocated comes from the allocator's peak in the same
    read as the levels; the levels reset that peak at each read, so the
    program's peak since its own reset is kept in the tally (as wrap_peaks)."""
    sl = _levels.StepLevels()
    assert sl.peak(0, 300) == 300  # no levels: the allocator's own
    lv, clock, _ = make()
    sl.levels = lv
    lv.reader.peak = 5000
    lv.on_optimizer_step()  # the read resets the allocator's peak; the tally keeps 5000
    assert sl.peak(0, 300) == 5000
    assert sl.peak(1, 300) == 300  # another device: torch's own
    lv.tally[0] = 0  # the program's reset_peak_memory_stats
    assert sl.peak(0, 300) == 300


class Module:
    """nn.Module's hook calls, as far as Roots uses them."""
    glob_pre, glob_post = {}, {}

    def __init__(self, children=()):
        self.children, self.pre, self.post = list(children), {}, {}
        self._forward_pre_hooks = self.pre  # torch's name: Roots.set_pre swaps hooks in it

    def register_forward_pre_hook(self, fn, with_kwargs=False):
        return _Handle(self.pre, fn)

    def register_forward_hook(self, fn, always_call=False):
        return _Handle(self.post, fn)

    def __call__(self, *args):
        pre = [(h, False) for h in Module.glob_pre.values()] + [(h, True) for h in self.pre.values()]
        for h, kw in pre:  # as torch: the hooks there when the call began
            h(self, args, {}) if kw else h(self, args)
        for c in self.children:
            c(*args)
        for h in (*Module.glob_post.values(), *self.post.values()):
            h(self, args, None)


class _Handle:
    n = [0]

    def __init__(self, d, fn):
        _Handle.n[0] += 1
        self.d, self.k = d, _Handle.n[0]
        self.id = self.k
        d[self.k] = fn

    def remove(self):
        self.d.pop(self.k, None)


def _hooking_torch():
    """A torch whose global module hooks go to the fake Module's."""
    mm = types.SimpleNamespace(register_module_forward_pre_hook=lambda fn: _Handle(Module.glob_pre, fn),
                               register_module_forward_hook=lambda fn: _Handle(Module.glob_post, fn))
    return types.SimpleNamespace(nn=types.SimpleNamespace(modules=types.SimpleNamespace(module=mm)))


def test_roots_are_found_then_only_they_keep_hooks():
    torch = _hooking_torch()
    lv, clock, _ = make()
    roots = _levels.Roots(torch, lv)
    roots.start()
    leaf = Module()
    model, loss = Module([Module([leaf]), Module()]), Module()
    model(T(8, 256))
    loss(T(8, 256, 50))
    roots.on_optimizer_step()
    lv.on_optimizer_step()
    assert not Module.glob_pre and not Module.glob_post  # discovery over
    assert set(roots.seen) == {id(model), id(loss)}
    assert leaf.pre == {} and len(model.pre) == 1 and len(loss.post) == 1
    model(T(4, 128))
    lv.on_optimizer_step()
    got = lv.drain()
    assert got[1]["inputs"] == [[4, 128]]
    roots.remove()
    assert model.pre == {} and loss.post == {}


def test_discovery_ends_once_the_root_calls_find_no_new_root():
    """Without an optimizer step (generation, serving), the global hooks go
    after SETTLE_CALLS root calls in a row that found no new root, not after
    PROBE_CALLS: every module call pays for them meanwhile."""
    torch = _hooking_torch()
    lv, clock, _ = make(grad=False)
    roots = _levels.Roots(torch, lv)
    roots.start()
    model, head = Module([Module()]), Module()
    model(T(1, 8))
    for _ in range(_levels.SETTLE_CALLS - 2):
        model(T(1, 1))
    head(T(1, 4))  # a second root, found before the settling ends: counting starts again
    assert Module.glob_pre and not roots.done
    for _ in range(_levels.SETTLE_CALLS - 1):
        model(T(1, 1))
    assert Module.glob_pre and not roots.done
    model(T(1, 1))
    assert not Module.glob_pre and not Module.glob_post and roots.done
    assert set(roots.seen) == {id(model), id(head)} and roots.calls == 2 * _levels.SETTLE_CALLS
    assert roots.calls < _levels.PROBE_CALLS
    model(T(2, 1))  # the roots' own hooks go on: each call a forward step
    head(T(2, 4))
    assert [e["inputs"] for e in lv.drain()][-2:] == [[[2, 1]], [[2, 4]]]
    roots.remove()


def test_paused_roots_make_no_steps_and_resume_as_they_were():
    """StepLevels.pause (the cost measurement's off calls): the roots' hooks
    go and come back; calls while paused are no steps."""
    torch = _hooking_torch()
    lv, clock, _ = make(grad=False)
    sl = _levels.StepLevels()
    sl.levels = lv
    roots = _levels.Roots(torch, lv)
    assert not sl.pause(True)  # no hooks yet
    sl.hooks = (None, roots)
    roots.start()
    model = Module([Module()])
    assert not sl.pause(True)  # discovery still on: nothing to pause
    for b in range(_levels.SETTLE_CALLS + 1):
        model(T(b + 1, 4))
    assert roots.done and len(model.pre) == 1 and len(model.post) == 1
    n = len(lv.drain())
    assert sl.pause(True) and model.pre == {} and model.post == {}
    model(T(50, 4))
    assert lv.drain() == []
    assert sl.pause(False) and len(model.pre) == 1 and len(model.post) == 1
    assert sl.pause(False) and len(model.pre) == 1  # twice: still one of each
    model(T(60, 4))
    got = lv.drain()
    assert n == _levels.SETTLE_CALLS + 1 and [e["inputs"] for e in got] == [[[60, 4]]]
    roots.remove()


def test_agent_parts_off_and_on_between_calls(monkeypatch):
    """_agent._parts (cost.py --alternate): off takes the roots' hooks away
    and pauses the stack sampler (its thread does not tick); on brings both
    back, the same sampler."""
    from vramscope.agent import _agent, _stacks

    torch = _hooking_torch()
    lv, clock, _ = make(grad=False)
    sl = _levels.StepLevels()
    sl.levels, roots = lv, _levels.Roots(torch, lv)
    sl.hooks = (None, roots)
    sent = []
    fake = types.SimpleNamespace(levels=sl, start_stacks=lambda: _stacks.start(lambda m, p: sent.append(m)))
    monkeypatch.setattr(_agent, "_agent", fake)
    monkeypatch.delenv("VRAMSCOPE_STACK_HZ", raising=False)
    roots.start()
    model = Module([Module()])
    try:
        assert not _agent._parts(False)  # discovery on: nothing is taken away
        for _ in range(_levels.SETTLE_CALLS + 1):
            model(T(1, 4))
        fake.start_stacks()
        smp = _stacks.sampler()
        ticks = []
        smp.sample = lambda me: ticks.append(me)  # count the ticks
        def until(pred, limit=3.0):
            end = time.monotonic() + limit
            while not pred() and time.monotonic() < end:
                time.sleep(0.02)
            return pred()

        assert until(lambda: len(ticks) >= 2)  # 10 Hz
        assert _agent._parts(False)
        assert model.pre == {} and not smp.running.is_set()
        seen = [len(ticks)]

        def still():  # no tick for 0.3 s (a tick under way when paused may end first)
            time.sleep(0.3)
            n, seen[0] = seen[0], len(ticks)
            return n == seen[0]

        assert until(still)
        n = len(ticks)
        time.sleep(0.5)
        assert len(ticks) == n  # 5 periods: the thread does not tick while paused
        assert _agent._parts(True)
        assert len(model.pre) == 1 and _stacks.sampler() is smp and smp.thread.is_alive()  # its caches kept
        assert until(lambda: len(ticks) > n)
    finally:
        _stacks.stop()
        roots.remove()


def test_roots_lose_their_post_hooks_in_training_and_get_them_back_for_evaluation():
    torch = _hooking_torch()
    lv, clock, state = make()
    roots = _levels.Roots(torch, lv)
    lv.posts, lv.on_first_step = roots.set_posts, roots.finish
    roots.start()
    model = Module([Module()])

    def train(n, shape=(8, 256)):
        for _ in range(n):
            model(T(*shape))
            clock.t += 0.01
            lv.on_optimizer_step()

    train(1)
    assert len(model.pre) == 1 and len(model.post) == 1
    train(_levels.QUIET_STEPS)
    assert model.post == {} and not lv.posted  # training alone: no post-hook
    state["grad"] = False
    model(T(32, 256))  # evaluation: the hook comes back and ends this call's step
    model(T(32, 128))
    state["grad"] = True
    assert len(model.post) == 1 and lv.posted
    train(2, (4, 256))
    got = lv.drain()
    assert [(e["phase"], e["inputs"][0]) for e in got[-4:]] == [
        ("eval", [32, 256]), ("eval", [32, 128]), ("train", [4, 256]), ("train", [4, 256])]
    train(_levels.QUIET_STEPS)
    assert model.post == {}
    roots.remove()
    assert model.pre == {} and model.post == {}


# The levels started on the CPU torch, the optimizer's hook called by the script
# (torch 1.13 has no global one).
CPU_START = """
class Hook:
    fn = None
    def __call__(self, _torch, fn, direct=False):
        self.fn = fn
        return self
    def remove(self):
        self.fn = None
hook = Hook()
lv, (handle, roots) = _levels.start(torch, [False], lambda: None, hook)
"""

CPU_RUN = """
import json, torch
from vramscope.agent import _levels
""" + CPU_START + """net, lossf = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), torch.nn.MSELoss()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
out = {}
with torch.no_grad():  # serving first: every call a step, the first one too
    for b in (1, 2, 3):
        net(torch.zeros(b, 8))
def train(n, b=4):
    for _ in range(n):
        x = torch.randn(b, 8)
        lossf(net(x), x).backward()
        opt.step()
        hook.fn(opt, (), {})  # torch >= 2.0 calls it: optimizer's global post-hook
train(1)
out["posts_first"] = [len(net._forward_hooks), len(lossf._forward_hooks)]
train(_levels.QUIET_STEPS + 1)
out["posts_training"] = [len(net._forward_hooks), len(lossf._forward_hooks)]
net.eval()
with torch.no_grad():
    for b in (5, 6):
        net(torch.zeros(b, 8))
out["posts_eval"] = [len(net._forward_hooks), len(lossf._forward_hooks)]
net.train()
train(1, 7)
out["steps"] = [(e["phase"], e.get("inputs")) for e in lv.drain()]
roots.remove()
out["posts_removed"] = [len(net._forward_hooks), len(net._forward_pre_hooks)]
print(json.dumps(out))
"""


def test_real_modules_on_the_cpu():
    """The hooks on real nn.Modules (torch on the CPU, .venv-torch): a
    forward's first call is a step of its own; training takes the roots'
    post-hooks away and an evaluation pass brings them back."""
    py = torch_python()
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    res = subprocess.run([py, "-c", CPU_RUN], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.splitlines()[-1])
    steps = out["steps"]
    assert steps[:3] == [["forward", [[b, 8]]] for b in (1, 2, 3)]
    n = _levels.QUIET_STEPS + 2
    assert steps[3:3 + n] == [["train", [[4, 8]]]] * n
    assert steps[3 + n:] == [["eval", [[5, 8]]], ["eval", [[6, 8]]], ["train", [[7, 8]]]]
    assert out["posts_first"] == [1, 1] and out["posts_training"] == [0, 0] and out["posts_eval"] == [1, 1]
    assert out["posts_removed"] == [0, 0]


class Generator(Module):
    """A model whose generate calls itself once a token, as Hugging Face's does."""

    def generate(self, ids, new=4, fail=False):
        for _ in range(new):
            self(ids)
            if fail:
                raise RuntimeError("boom")
        return "out"


def _discovered(torch, lv, model):
    roots = _levels.Roots(torch, lv)
    roots.start()
    for _ in range(_levels.SETTLE_CALLS + 1):
        model(T(1, 4))
    assert roots.done
    lv.drain()
    return roots


def test_a_generate_call_on_a_root_is_one_step_and_its_tokens_none():
    """A root whose class has a generate: each call is one step (its
    arguments' shapes, the phase a root call would have), its tokens' root
    calls reach no hook, and the hooks are back when it returns, or raises."""
    torch = _hooking_torch()
    lv, clock, _ = make(grad=False)
    model = Generator([Module()])
    hooked = []
    model.register_forward_pre_hook(lambda *a: hooked.append(len(model.pre)))  # runs with the roots' hooks
    own = Generator.__dict__["generate"]
    roots = _discovered(torch, lv, model)
    try:
        assert Generator.generate is not own and Generator.generate.__vramscope__
        hooked.clear()
        clock.t = 10.0
        assert model.generate(T(3, 7), new=5) == "out"
        assert hooked == [1] * 5  # only the test's own hook was there during the tokens
        got = lv.drain()
        assert [(e["phase"], e["inputs"]) for e in got] == [("forward", [[3, 7]])]
        assert len(model.pre) == 2 and len(model.post) == 1  # the roots' hooks are back
        model(T(2, 2))  # a plain call is still a step
        assert [e["inputs"] for e in lv.drain()] == [[[2, 2]]]
        with pytest.raises(RuntimeError, match="boom"):
            model.generate(T(3, 7), fail=True)
        assert lv.drain() == [] and lv.inputs is None and len(model.pre) == 2  # no step; the hooks back
        other = Generator()  # not a root: its generate is the original's, with hooks and steps as before
        other.generate(T(1, 1), new=2)
        assert lv.drain() == [] and len(model.pre) == 2
        lv.trained = True  # in a training program a generate call between steps is an evaluation step
        model.generate(T(4, 4), new=2)
        assert [(e["phase"], e["inputs"]) for e in lv.drain()] == [("eval", [[4, 4]])]
        lv.inputs = ((8, 9),)  # inside a training step a root call began (a rollout after a forward):
        model.generate(T(4, 4), new=2)  # no step of its own, and the training step keeps its inputs
        assert lv.drain() == [] and lv.inputs == ((8, 9),) and len(model.pre) == 2
        lv.on_optimizer_step()
        assert [(e["phase"], e["inputs"]) for e in lv.drain()] == [("train", [[8, 9]])]
    finally:
        roots.remove()
    assert Generator.__dict__["generate"] is own  # given back at detach


def test_generate_while_paused_or_nested_passes_through():
    """The cost measurement's off calls (pause) keep the hooks away across a
    generate; a generate inside another is no step of its own."""
    torch = _hooking_torch()
    lv, clock, _ = make(grad=False)
    model = Generator([Module()])
    roots = _discovered(torch, lv, model)
    try:
        roots.pause()
        model.generate(T(2, 3))
        assert lv.drain() == [] and model.pre == {} and model.post == {}
        roots.resume()
        assert len(model.pre) == 1 and len(model.post) == 1

        class Outer(Generator):
            def generate(self, ids, new=4, fail=False):
                return Generator.generate(self, ids, new=new)  # the wrapped one, already held

        outer = Outer()
        roots.seen[id(outer)] = outer
        roots._wrap_generate(Outer)
        outer.generate(T(5, 5))
        assert [e["inputs"] for e in lv.drain()] == [[[5, 5]]]

        class Detaching(Generator):  # the agent detaches while a generate call runs
            def generate(self, ids, new=4, fail=False):
                roots.remove()
                return "out"

        detaching = Detaching([Module()])
        roots.seen[id(detaching)] = detaching
        roots.roots.append(detaching)
        roots._wrap_generate(Detaching)
        detaching.generate(T(1, 1))
        assert model.pre == {} and model.post == {} and detaching.pre == {}  # no hook comes back after it
    finally:
        roots.remove()
    assert not any(getattr(c.__dict__["generate"], "__vramscope__", False) for c in (Generator, Outer, Detaching))


CPU_GENERATE = """
import json, torch
import transformers.generation.utils as gu
gu.is_fsdp_managed_module = lambda m: False  # Debian's torch 1.13 cannot import torch.distributed.fsdp on 3.11
from transformers import GPT2Config, GPT2LMHeadModel
from vramscope.agent import _levels
lv, (handle, roots) = _levels.start(torch, [False], lambda: None, lambda _t, _fn, **_k: object())
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64)).eval()
calls = []
model.register_forward_pre_hook(lambda m, a: calls.append(len(m._forward_pre_hooks)))
ids = torch.zeros(3, 5, dtype=torch.long)
kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=12, min_new_tokens=12, do_sample=False, pad_token_id=0)
out = {}
model.generate(ids, **kw)  # discovery ends within the first call's tokens
out["done"], out["first"] = roots.done, len(lv.drain())
calls.clear()
for b in (2, 4):
    x = torch.zeros(b, 6, dtype=torch.long)
    model.generate(x, **dict(kw, attention_mask=torch.ones_like(x)))
out["hooked"] = sorted(set(calls))
out["tokens"] = len(calls)
out["steps"] = [(e["phase"], e.get("inputs")) for e in lv.drain()]
with torch.no_grad():
    model(ids)  # a plain forward is still a step
out["after"] = [(e["phase"], e.get("inputs")) for e in lv.drain()]
out["wrapped"] = "generate" in GPT2LMHeadModel.__dict__
roots.remove()
out["unwrapped"] = "generate" not in GPT2LMHeadModel.__dict__
print(json.dumps(out))
"""


def test_real_hugging_face_generate_is_one_step_a_call():
    """A real GPT-2 (transformers, torch on the CPU): after discovery, each
    `generate` call is one step with its input ids' shape; its 12 tokens'
    forward calls run without the roots' hooks (only the test's own)."""
    py = torch_python("transformers")
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    res = subprocess.run([py, "-c", CPU_GENERATE], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["done"] and out["first"] == 12  # the first call: a step a token, as discovery went on
    assert out["tokens"] == 24 and out["hooked"] == [1]
    assert out["steps"] == [["forward", [[2, 6], [2, 6]]], ["forward", [[4, 6], [4, 6]]]]
    assert out["after"] == [["forward", [[3, 5]]]]
    assert out["wrapped"] and out["unwrapped"]


CPU_PEFT_GENERATE = """
import json, torch
import transformers.generation.utils as gu
gu.is_fsdp_managed_module = lambda m: False  # as in CPU_GENERATE
from transformers import GPT2Config, GPT2LMHeadModel
from peft import LoraConfig, get_peft_model
from vramscope.agent import _levels
lv, (handle, roots) = _levels.start(torch, [False], lambda: None, lambda _t, _fn, **_k: object())
base = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64)).eval()
model = get_peft_model(base, LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True,
                                        task_type="CAUSAL_LM")).eval()
ids = torch.zeros(3, 5, dtype=torch.long)
kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=12, min_new_tokens=12, do_sample=False, pad_token_id=0)
model.generate(input_ids=ids, **kw)
out = {"roots": [type(r).__name__ for r in roots.roots], "wrapped": [c.__name__ for c, _, _ in roots.generates]}
lv.drain()
model.generate(input_ids=ids, **kw)
out["steps"] = [(e["phase"], e.get("inputs")) for e in lv.drain()]
roots.remove()
print(json.dumps(out))
"""


def test_a_lora_model_generate_is_one_step_through_peft():
    """peft's PeftModelForCausalLM.generate calls the base model's: the base
    model is the root its tokens call, its generate the one wrapped, and a
    call through peft is one step with the input ids' and mask's shapes."""
    py = torch_python("transformers", "peft")
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    res = subprocess.run([py, "-c", CPU_PEFT_GENERATE], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["roots"] == ["GPT2LMHeadModel"] and out["wrapped"] == ["GPT2LMHeadModel"]
    assert out["steps"] == [["forward", [[3, 5], [3, 5]]]]


CPU_SERVE = """
import json, torch
from torch.nn.modules import module as mm
from vramscope.agent import _levels
lv, (handle, roots) = _levels.start(torch, [False], lambda: None, lambda _t, _fn, **_k: object())
block = lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
net = torch.nn.Sequential(*[block() for _ in range(4)])
out = {"global": []}
with torch.no_grad():  # a request loop: no optimizer step ever
    for i in range(_levels.SETTLE_CALLS + 4):
        net(torch.zeros(1 + i % 3, 8))
        out["global"].append(len(mm._global_forward_pre_hooks) + len(mm._global_forward_hooks))
out["calls"], out["done"], out["roots"] = roots.calls, roots.done, len(roots.roots)
out["steps"] = [(e["phase"], e.get("inputs")) for e in lv.drain()]
roots.remove()
print(json.dumps(out))
"""


def test_real_modules_lose_the_global_hooks_once_no_new_root_comes():
    """Real nn.Modules without an optimizer step (torch on the CPU): torch's
    global module hooks, which slow every module's call, are gone after
    SETTLE_CALLS root calls that found no new root, and each root call is
    still a step with its inputs."""
    py = torch_python()
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    res = subprocess.run([py, "-c", CPU_SERVE], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.splitlines()[-1])
    k = _levels.SETTLE_CALLS
    assert out["global"] == [2] * k + [0] * 4  # the (k+1)th root call took them away
    assert out["done"] and out["roots"] == 1 and out["calls"] == k + 1
    assert out["steps"] == [["forward", [[1 + i % 3, 8]]] for i in range(k + 4)]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


def test_reads_get_rarer_when_they_would_cost_more_than_the_budget():
    lv, clock, _ = make()
    reader = lv.reader
    slow_read = reader.read

    def read():
        clock.t += 100e-6  # a read costs 100 µs: 1% of a 10 ms step
        return slow_read()

    reader.read = read
    for _ in range(300):
        clock.t += 0.010
        lv.on_optimizer_step()
    # 50: 100 µs as timed, 400 µs as it costs (UNTIMED), over 0.08% of 10 ms
    want = math.ceil(100e-6 * _levels.UNTIMED / (_levels.AIM * _levels.BUDGET * 0.010))
    assert lv.stride == want
    got = lv.drain()
    late = got[200:]
    measured = [e for e in late if e["allocated"] >= 0]
    assert len(late) // want <= len(measured) <= len(late) // want + 1, len(measured)
    assert all(e["dur_us"] > 0 for e in late)  # every step keeps its duration
    lv.on_oom()  # the failing step is always read
    assert lv.drain()[-1]["allocated"] >= 0
    # cheap reads: every step again (once the moving average of a read's cost has come down)
    reader.read = slow_read
    for _ in range(600):
        clock.t += 0.010
        lv.on_optimizer_step()
    assert lv.stride == 1


def test_on_very_short_steps_the_stride_reaches_a_read_a_second():
    """Reads that would pass the budget even every 1,000 steps (2 ms on 1 ms
    steps) come once every READ_GAP_S, past MAX_STRIDE, and the budget is set
    again no sooner than the stride (each setting needs a read) once past
    its first settings at steps 2, 4, ... 64."""
    lv, clock, _ = make()
    reader = lv.reader
    slow_read = reader.read

    def read():
        clock.t += 2e-3
        return slow_read()

    reader.read = read
    for _ in range(6000):
        clock.t += 0.001
        lv.on_optimizer_step()
    want = int(_levels.READ_GAP_S / 0.001)  # 1000 steps of 1 ms (the steps' mean has the reads in it: 997)
    assert want > _levels.MAX_STRIDE and want * 0.99 <= lv.stride <= want
    got = lv.drain(6000)
    assert [e["step"] for e in got] == list(range(6000))
    early = {e["step"] for e in got[:65] if e["allocated"] >= 0}
    assert {2, 4, 8, 16, 32, 64} <= early, early  # the first settings of the budget, each at a read
    read_at = [e["step"] for e in got if e["allocated"] >= 0 and e["step"] >= 2000]
    assert len(read_at) >= 3 and all(b - a == lv.stride for a, b in zip(read_at, read_at[1:])), read_at
    assert all(e["dur_us"] > 0 for e in got[1:])


def test_short_eval_steps_leave_the_training_steps_stride_alone():
    lv, clock, state = make()
    reader = lv.reader
    slow_read = reader.read

    def read():
        clock.t += 5e-6  # 5 µs (20 with UNTIMED): within 0.08% of a 40 ms training step, not of a 2 ms eval step
        return slow_read()

    reader.read = read
    for n in range(200):
        clock.t += 0.040
        lv.on_optimizer_step()
        if n % 50 == 49:  # an evaluation pass of 20 short steps
            state["grad"] = False
            for _ in range(20):
                clock.t += 0.002
                lv.root_pre(None, (T(8, 8),), None)
                lv.root_post(None, (), None)
            state["grad"] = True
    assert lv.strides["train"] == 1 and lv.strides["eval"] > 1
    got = lv.drain()
    assert all(e["allocated"] >= 0 for e in got if e["phase"] == "train")


def test_hooks_do_nothing_while_torch_compile_traces_them(monkeypatch):
    lv, clock, state = make()
    monkeypatch.setattr(_levels, "_compiling", lambda: True)
    lv.root_pre(None, (T(4, 8),), None)
    lv.root_post(None, (), None)
    roots = _levels.Roots(types.SimpleNamespace(), lv)
    roots._pre(object(), (T(4, 8),))
    assert lv.in_root == 0 and lv.inputs is None and lv.t_first is None and roots.depth == 0 and not roots.seen
    monkeypatch.setattr(_levels, "_compiling", lambda: False)
    train_step(lv, clock, 4, 8)
    assert [e["inputs"] for e in lv.drain()] == [[[4, 8], [4, 8]]]


@pytest.fixture
def no_read_gap(monkeypatch):
    """Strides of MAX_STRIDE at most, however short the steps (the sparse tests' 3 ms
    steps would otherwise be read once a second: READ_GAP_S)."""
    monkeypatch.setattr(_levels, "READ_GAP_S", 0)


class TickClock:
    """A clock that moves `tick` at every reading: each hook's own timing sees that much."""

    def __init__(self, tick):
        self.t, self.tick = 0.0, tick

    def __call__(self):
        self.t += self.tick
        return self.t


class Trainable(Module):
    """A root with nn.Module's train() and eval()."""

    def train(self, mode=True):
        self.training = mode
        return self

    def eval(self):
        return self.train(False)


class Boom(Module):
    """A module that runs out of memory on a batch of 16 x 1024, as the
    allocator would: the agent's observer (Levels.on_oom) first."""

    def __init__(self, lv):
        super().__init__()
        self.lv = lv

    def __call__(self, *args):
        if args[0].shape == (16, 1024):
            self.lv.on_oom()
            raise MemoryError("out of memory")
        super().__call__(*args)


def _sparse_run(dt):
    """A root found and trained with hooks that cost 2 µs each (their clock
    pairs), steps of dt seconds, step i's inputs (8, 100 + i); the
    optimizer's hook as torch calls it (Levels.step_hook)."""
    torch = _hooking_torch()
    clock = TickClock(2e-6)
    state = {"grad": True}
    lv = _levels.Levels(reader=FakeReader(), grad_enabled=lambda: state["grad"], clock=clock,
                        wall=lambda: 1700000000.5 + clock.t)
    roots = _levels.Roots(torch, lv)
    lv.posts, lv.on_first_step = roots.set_posts, roots.finish
    roots.start()
    model = Trainable([Boom(lv)])
    hook = lv.step_hook()
    hooked = []  # (step, whether root_pre was the pre-hook at its call)

    def train(n, big=None):
        """n steps; with big ("forward" or "backward"), one step of 16 x 1024
        that runs out of memory there; returns the steps' number."""
        for _ in range(n):
            i = lv.steps_ended
            x = T(16, 1024) if big else T(8, 100 + i)
            hooks = list(model.pre.values())  # none before discovery
            hooked.append((i, hooks == [lv.root_pre]))
            try:
                model(x)
            except MemoryError:
                return i
            if big == "backward":  # after the root's call, in the frame that made it
                lv.on_oom()
                return i
            clock.t += dt
            hook(None, (), {})
        return lv.steps_ended

    return lv, roots, model, state, clock, train, hooked


@pytest.mark.usefixtures("no_read_gap")
@pytest.mark.parametrize("where", ["forward", "backward"])
def test_short_steps_keep_inputs_at_read_steps_only_and_the_failing_steps_always(where):
    """Where the hooks alone pass the budget (2 µs + 2 µs on 3 ms steps), the
    root's pre-hook runs on read steps only: between them the root has none
    and a step is the optimizer hook's fast path (its clock appended, not
    timed); every read step has its own inputs, and an out-of-memory error
    between reads gets the failing call's from the stack: in the forward,
    the root call's frame; after it (backward), the call read back from the
    frame that made it."""
    lv, roots, model, state, clock, train, hooked = _sparse_run(0.003)
    train(400)
    assert lv.sparse and lv.strides["train"] > 1
    got = {e["step"]: e for e in lv.drain()}
    late = [got[n] for n in range(200, 400)]
    read = [e for e in late if e["allocated"] >= 0]
    assert 0 < len(read) < len(late) / 2
    assert all(e["inputs"] == [[8, 100 + e["step"]]] for e in read)
    assert all("inputs" not in e for e in late if e["allocated"] < 0)
    assert all(e["dur_us"] > 0 for e in late)  # every step keeps its duration
    full = {n for n, f in hooked if f}
    assert {e["step"] for e in read} <= full and len(full & set(range(200, 400))) == len(read)
    assert lv.fast_n > len(late) / 2  # the fast path took most steps
    while len(lv.times) > lv.due - 3:  # between reads, root_pre not back yet
        train(1)
    assert model.pre == {} and lv.armed and lv.times
    n = train(1, big=where)  # runs out of memory between reads
    got = lv.drain()
    e = got[-1]
    assert e["step"] == n and e["oom"] and e["inputs"] == [[16, 1024]] and e["allocated"] >= 0
    assert [x["step"] for x in got] == list(range(got[0]["step"], n + 1))  # the fast steps before it kept, in order
    assert not lv.armed and lv.times == []
    roots.remove()
    assert model.pre == {} and not getattr(Trainable.train, "__vramscope__", False)


@pytest.mark.usefixtures("no_read_gap")
def test_sparse_hooks_come_back_for_an_evaluation_pass_that_eval_begins():
    lv, roots, model, state, clock, train, hooked = _sparse_run(0.003)
    train(300)
    assert lv.sparse and not lv.pre_full
    n = lv.steps_ended
    model.eval()  # the root's eval(): root_pre at once, for the pass's calls
    assert lv.pre_full
    state["grad"] = False
    for b in (16, 17, 18):
        model(T(b, 64))
        clock.t += 0.001
    state["grad"] = True
    model.train()
    train(2)
    got = [(e["phase"], e.get("inputs")) for e in lv.drain() if e["step"] >= n]
    assert got[:3] == [("eval", [[b, 64]]) for b in (16, 17, 18)]
    assert [p for p, _ in got[3:]] == ["train", "train"]
    train(_levels.QUIET_STEPS + 2 * _levels.MAX_STRIDE)
    assert lv.sparse and not lv.posted and model.post == {}
    assert not lv.pre_full or lv.left_train == 1
    # without eval(), between reads: the pass goes with the next training step (docs/road-to-oom.md)
    while not lv.armed or len(lv.times) > lv.due - 3:
        train(1)
    n = lv.steps_ended
    state["grad"] = False
    for b in (16, 17):
        model(T(b, 64))
    state["grad"] = True
    train(1)
    assert [e["phase"] for e in lv.drain() if e["step"] >= n] == ["train"]
    roots.remove()


def test_the_budget_counts_what_the_hooks_do_not_time():
    """Hooks that time about 4 µs a step (2 µs a clock reading) on 15 ms steps:
    0.03% as timed, within the budget's 0.08%, but past it at what they cost
    (UNTIMED): sparse."""
    lv, roots, model, state, clock, train, hooked = _sparse_run(0.015)
    train(300)
    assert lv.sparse and lv.fast_n > 0 and lv.base > _levels.AIM * _levels.BUDGET * 0.015
    assert lv.base / _levels.UNTIMED < _levels.AIM * _levels.BUDGET * 0.015
    roots.remove()


def test_long_steps_keep_every_steps_inputs():
    lv, roots, model, state, clock, train, hooked = _sparse_run(0.050)
    train(300)
    assert not lv.sparse and lv.pre_full
    assert all(e["inputs"] == [[8, 100 + e["step"]]] for e in lv.drain() if e["step"] > 0)
    roots.remove()


@pytest.mark.usefixtures("no_read_gap")
def test_a_root_whose_hooks_cannot_be_swapped_keeps_root_pre():
    lv, roots, model, state, clock, train, hooked = _sparse_run(0.003)
    del model._forward_pre_hooks  # not torch's dict: set_pre fails
    train(300)
    assert not lv.sparse and lv.pre_full and lv.set_pre is None
    (hook,) = model.pre.values()
    assert hook == lv.root_pre
    assert all(e["inputs"] == [[8, 100 + e["step"]]] for e in lv.drain() if e["step"] > 0)
    roots.remove()


CPU_SPARSE = """
import json, torch
from vramscope.agent import _levels
_levels.BUDGET = 1e-9  # every step's hooks pass it: sparse at once
_levels.READ_GAP_S = 0  # strides of MAX_STRIDE at most, however short the steps
""" + CPU_START + """lv.find_reader = None
class Reader:
    index = 0
    def read(self):
        return (1, 2, 3, 4)
lv.reader = Reader()
class Boom(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 33:  # runs out of memory: the allocator calls the agent's observer first
            lv.on_oom()
            raise MemoryError("out of memory")
        return x
net, lossf = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), Boom()), torch.nn.MSELoss()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
out = {"hooks": [], "oom": []}
def train(n, big=None):
    for _ in range(n):
        x = torch.zeros(big, 8) if big else torch.randn(lv.steps_ended % 7 + 1, 8)
        out["hooks"].append([lv.steps_ended, [h.__name__ for h in net._forward_pre_hooks.values()],
                             len(lossf._forward_pre_hooks)])
        try:
            y = net(x.float())
        except MemoryError:
            return
        if big:  # runs out of memory after the forward (as in backward), in the frame that called it
            lv.on_oom()
            return
        lossf(y, x).backward()
        opt.step()
        hook.fn(opt, (), {})
train(300)
out["sparse"], out["stride"], out["fast"] = lv.sparse, lv.strides["train"], lv.fast_n
out["steps"] = [(e["step"], e["allocated"], e.get("inputs")) for e in lv.drain()]
for big in (33, 34):
    while not lv.armed or len(lv.times) > lv.due - 3:  # between reads: no root pre-hook
        train(1)
    train(1, big)
    out["oom"] += [(e["oom"], e.get("inputs")) for e in lv.drain() if e.get("oom")]
net.eval()
with torch.no_grad():
    for b in (5, 6):
        net(torch.zeros(b, 8))
net.train()
train(1)
out["eval"] = [(e["phase"], e.get("inputs")) for e in lv.drain()]
roots.remove()
out["removed"] = [len(net._forward_pre_hooks), len(lossf._forward_pre_hooks), "train" in torch.nn.Sequential.__dict__]
print(json.dumps(out))
"""


def test_real_modules_between_reads_on_the_cpu(tmp_path):
    """Sparse on real nn.Modules (torch on the CPU, .venv-torch): between
    reads neither the model nor the loss module has a pre-hook and most
    steps are the optimizer hook's fast path; read steps keep their own
    inputs; an out-of-memory error between reads gets the failing call's
    from the stack, inside the forward (torch's call frame) and after it
    (the script's call read back); eval() brings the hooks back for the
    pass; detaching leaves no hook and gives Sequential its train() back."""
    py = torch_python()
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    script = tmp_path / "sparse_cpu.py"  # a file: read back from its source
    script.write_text(CPU_SPARSE)
    res = subprocess.run([py, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["sparse"] and out["stride"] == _levels.MAX_STRIDE and out["fast"] > 100
    late = [s for s in out["steps"] if s[0] >= 100]
    read = [s for s in late if s[1] >= 0]
    assert [s[0] for s in out["steps"]] == list(range(len(out["steps"])))
    assert 0 < len(read) <= len(late) // _levels.MAX_STRIDE + 1
    assert all(inp == [[s % 7 + 1, 8]] for s, _, inp in read)
    assert all(inp is None for s, a, inp in late if a < 0)
    between = [h for h in out["hooks"] if 100 <= h[0] < 300 and h[0] not in {s for s, _, _ in read}]
    assert between and all(names == [] and n == 0 for _, names, n in between[1:-1])
    assert all(names == ["root_pre"] and n == 1 for s, names, n in out["hooks"] if s in {r[0] for r in read})
    assert out["oom"] == [[True, [[33, 8]]], [True, [[34, 8]]]]
    assert out["eval"][:2] == [["eval", [[5, 8]]], ["eval", [[6, 8]]]] and out["eval"][2][0] == "train"
    assert out["removed"] == [0, 0, False]


def test_the_optimizer_hook_never_raises():
    """torch calls the hook inside the program's opt.step(): a fault in the
    levels loses steps, never the program's step."""
    lv, clock, _ = make()
    hook = lv.step_hook()
    hook(None, (), {})
    lv.ring = None  # broken
    clock.t += 0.01
    assert hook(None, (), {}) is None and lv.times == []
