"""A snapshot's tensor walk on the worker thread and the user's backward()
never run at once (vramscope/agent/_torch.py graph_lock): the walk reads
saved tensors and .grad, which autograd's threads release and replace during
backward without the GIL; on the H200 a memory warning's snapshot taken
beside a GPT-2 loop crashed it (free(): invalid pointer)."""
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
