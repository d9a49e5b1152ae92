"""A snapshot's tensor walk on the worker thread and the user's backward()
never run at once (vramscope/agent/_torch.py graph_lock): the walk reads
saved tensors and .grad, which autograd's threads release and replace during
backward without the GIL; on the H200 a memory warning's snapshot taken
beside a GPT-2 loop crashed it (free(): invalid pointer)."""
import sys
import threading
import time
import types

from vramscope.agent import _capture, _tensors, _torch


def _fake(monkeypatch, walked):
    def name_tensors(torch):
        walked.append(("walk", time.monotonic(), _torch.graph_lock.locked()))
        time.sleep(0.2)
        return {"entries": [], "took_ms": 200.0, "truncated": False}

    monkeypatch.setattr(_tensors, "name_tensors", name_tensors)
    monkeypatch.setattr(_torch, "imported", lambda: types.SimpleNamespace())
    monkeypatch.setattr(_capture, "_memory_caps", lambda torch, snap: None)
    monkeypatch.setattr(_torch, "_annotating", [True])


def test_a_walk_waits_for_the_backward_running(monkeypatch):
    walked = []
    _fake(monkeypatch, walked)

    def orig(*a, **k):
        walked.append(("backward in", time.monotonic(), _torch.graph_lock.locked()))
        time.sleep(0.3)
        walked.append(("backward out", time.monotonic(), None))

    backward = _torch._backward_wrapper(orig, None)
    t = threading.Thread(target=backward)
    t.start()
    time.sleep(0.05)
    assert _capture._name_into({}, beside=True)
    t.join()
    kinds = [w[0] for w in walked]
    assert kinds == ["backward in", "backward out", "walk"], walked
    assert walked[0][2] and walked[2][2]  # each held the lock


def test_a_backward_waits_for_the_walk(monkeypatch):
    walked = []
    _fake(monkeypatch, walked)
    backward = _torch._backward_wrapper(lambda: walked.append(("backward", time.monotonic(), None)), None)
    t = threading.Thread(target=lambda: _capture._name_into({}, beside=True))
    t.start()
    time.sleep(0.05)
    backward()
    t.join()
    assert [w[0] for w in walked] == ["walk", "backward"]
    assert walked[1][1] - walked[0][1] >= 0.15


def test_the_oom_observers_walk_takes_no_lock(monkeypatch):
    """Inside backward (the lock held by its wrapper), an OOM's walk must not wait."""
    walked = []
    _fake(monkeypatch, walked)

    def orig():
        t0 = time.monotonic()
        assert _capture._name_into({})
        walked.append(("oom walk took", time.monotonic() - t0, None))

    _torch._backward_wrapper(orig, None)()
    assert walked[-1][1] < 1.0 and not _torch.graph_lock.locked()


def test_a_backward_inside_a_backward_on_another_thread_does_not_wait(monkeypatch):
    """Reentrant checkpointing runs backward() on autograd's thread inside the
    user's backward: it must not wait for the lock its caller holds."""
    walked = []
    _fake(monkeypatch, walked)
    inner = _torch._backward_wrapper(lambda: walked.append(("inner", time.monotonic(), None)), None)

    def outer_orig():
        t = threading.Thread(target=inner)  # another thread, as autograd's engine
        t.start()
        t.join(5)
        assert not t.is_alive(), "the inner backward waited for the outer one's lock"

    _torch._backward_wrapper(outer_orig, None)()
    assert [w[0] for w in walked] == ["inner"] and not _torch.graph_lock.locked() and _torch.backward_depth[0] == 0


# --- the walk at a step's end, on the training thread ------------------------------

from vramscope.agent import _levels  # noqa: E402


class _Steps:
    """A training thread: optimizer steps every 10 ms on a Levels."""

    def __init__(self, lv, inside=None):
        self.lv, self.stop, self.inside = lv, threading.Event(), inside
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            time.sleep(0.01)
            if self.inside is not None:
                self.inside(self.lv.on_optimizer_step)
            else:
                self.lv.on_optimizer_step()

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.t.join(5)


def _trained():
    lv = _levels.Levels()
    lv.trained = True
    return lv


def test_at_step_end_runs_on_the_training_thread():
    lv = _trained()
    with _Steps(lv) as steps:
        ran, got = lv.at_step_end(lambda: threading.get_ident(), 5)
    assert ran and got == steps.t.ident and lv.wanted is None


def test_at_step_end_without_optimizer_steps_returns_at_once():
    lv = _levels.Levels()
    t0 = time.monotonic()
    assert lv.at_step_end(lambda: 1, 5) == (False, None)
    assert time.monotonic() - t0 < 0.5


def test_at_step_end_withdrawn_after_its_time_never_runs():
    lv = _trained()
    calls = []
    assert lv.at_step_end(lambda: calls.append(1), 0.05) == (False, None)  # no step ends meanwhile
    lv.on_optimizer_step()
    assert calls == [] and lv.wanted is None


def test_at_step_end_waits_out_a_step_inside_backward():
    """An optimizer step inside backward (per-parameter steps in gradient
    hooks) is no safe point: the walk waits for a step's end outside one."""
    lv = _trained()
    seen = []
    n = [0]

    def inside(step):
        n[0] += 1
        if n[0] <= 5:  # the first steps come inside a backward()
            _torch.backward_depth[0] += 1
            try:
                step()
            finally:
                _torch.backward_depth[0] -= 1
        else:
            step()

    with _Steps(lv, inside):
        ran, _ = lv.at_step_end(lambda: seen.append(_torch.backward_depth[0]) or n[0], 5,
                                ready=lambda: _torch.backward_depth[0] == 0)
    assert ran and seen == [0] and n[0] > 5


def test_a_snapshot_beside_a_training_loop_is_named_at_a_step_end(monkeypatch):
    walked = []
    _fake(monkeypatch, walked)
    ident = []
    orig = _tensors.name_tensors

    def name_tensors(torch):
        ident.append(threading.get_ident())
        return orig(torch)

    monkeypatch.setattr(_tensors, "name_tensors", name_tensors)
    sl = _levels.StepLevels()
    sl.levels, sl.hooks = _trained(), ("handle", "roots")
    with _Steps(sl.levels) as steps:
        while sl.levels.step < 2:  # the loop is under way
            time.sleep(0.005)
        snap = {}
        assert _capture._name_into(snap, beside=True, levels=sl)
    assert ident == [steps.t.ident] and "vramscope_tensors" in snap
    assert not walked[0][2]  # no lock: no backward runs at a step's end


def test_a_snapshot_beside_a_program_without_steps_is_named_under_the_lock(monkeypatch):
    walked = []
    _fake(monkeypatch, walked)
    sl = _levels.StepLevels()
    sl.levels, sl.hooks = _levels.Levels(), ("handle", "roots")
    assert _capture._name_into({}, beside=True, levels=sl)
    assert walked[0][2]  # on this thread, holding graph_lock


# --- optimizer steps inside backward() ----------------------------------------------


def _fake_step_hooks(monkeypatch):
    """A torch.optim.optimizer with the global step post-hooks; returns step()."""
    hooks = {}
    mod = types.ModuleType("torch.optim.optimizer")

    class Handle:
        def __init__(self, k):
            self.k = k

        def remove(self):
            hooks.pop(self.k, None)

    def register_optimizer_step_post_hook(fn):
        hooks[len(hooks)] = fn
        return Handle(len(hooks) - 1)

    mod.register_optimizer_step_post_hook = register_optimizer_step_post_hook
    for name, m in (("torch", types.ModuleType("torch")), ("torch.optim", types.ModuleType("torch.optim")),
                    ("torch.optim.optimizer", mod)):
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.setattr(_torch, "_annotating", [True])
    return lambda: [h("opt", (), {}) for h in list(hooks.values())]


def test_steps_inside_a_backward_end_with_it_once(monkeypatch):
    step = _fake_step_hooks(monkeypatch)
    calls = []
    handle = _torch.register_step_hook(None, lambda opt, a, k: calls.append((opt, _torch.backward_depth[0])))
    backward = _torch._backward_wrapper(lambda: [step() for _ in range(3)], None)  # three parameters' steps
    backward()
    assert calls == [(None, 0)]  # once, after the backward
    step()
    assert calls[-1] == ("opt", 0)  # a step outside a backward: at once
    handle.remove()
    calls.clear()
    other = _torch.register_step_hook(None, lambda opt, a, k: calls.append("other"))
    gone = _torch.register_step_hook(None, lambda opt, a, k: calls.append("gone"))

    def steps_then_detach():
        step()
        gone.remove()  # the agent detached during the backward: its deferred call goes too

    _torch._backward_wrapper(steps_then_detach, None)()
    other.remove()
    assert calls == ["other"] and not _torch._deferred


def test_a_snapshot_between_training_cells_does_not_wait_for_a_step(monkeypatch):
    """A notebook after its training cell (steps made, none under way): the
    walk runs at once beside the program, not after waiting for a step."""
    walked = []
    _fake(monkeypatch, walked)
    lv = _trained()
    for _ in range(3):
        lv.on_optimizer_step()
    sl = _levels.StepLevels()
    sl.levels, sl.hooks = lv, ("handle", "roots")
    assert lv.next_step_in() >= 1.0  # the steps just ended: one may come
    lv.clock = lambda: time.perf_counter() + 5.0  # 5 s later, none came
    assert lv.next_step_in() == 0.0
    t0 = time.monotonic()
    assert _capture._name_into({}, beside=True, levels=sl)
    assert time.monotonic() - t0 < 0.5 and walked[0][2]  # at once, under the lock
