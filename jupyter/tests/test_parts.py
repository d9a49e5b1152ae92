"""The agent's parts work with only what they are handed (agent/_agent.py):
a Link against a daemon with plain callables for facts, counters, levels and
agent.dump, no Agent anywhere; Captures answering a bad agent.dump through the
link it was given. A part that reached into the Agent's attributes again
would fail here with an AttributeError."""
import os
import threading

import pytest

from vramscope import _api
from vramscope.agent import _capture, _link


def _facts(pid):
    """agent.register's facts of a process pid (the link registers with them)."""
    return {"pid": pid, "host": "h", "rank": 0, "local_rank": 0, "world_size": 1, "argv": ["t.py"],
            "python": "3.12.0", "device": 0, "recording": False, "max_entries": 1,
            "api_version": _api.API_VERSION}


@pytest.mark.fake_only
def test_a_link_alone_registers_sends_counters_and_hands_over_dumps(daemon, tmp):
    stop = threading.Event()
    registered, dumps = [], []
    facts = _facts(4242)
    counters = {"time_ms": 1, "device": 0, "allocated": 7, "reserved": 8, "max_allocated": 9}
    box = {}

    def on_dump(gen, rid, params):  # on the link's thread, as Captures.dump is
        dumps.append(params)
        box["link"].respond(gen, rid, result={"path": params["path"], "bytes": 1, "entries": -1})

    link = _link.Link(daemon.socket, stop, facts=lambda: dict(facts), counters=lambda: dict(counters),
                      levels=lambda n: None, on_registered=lambda: registered.append(True), on_dump=on_dump)
    box["link"] = link
    assert link.start() and not link.start(), "a second start() made a second thread"
    try:
        assert daemon.wait_register(pid=4242)["argv"] == ["t.py"]
        assert daemon.wait_torch(pid=4242)["allocated"] == 7
        path = os.path.join(daemon.incoming_dir, "x.part")
        res = daemon.dump(4242, path)
        assert res.get("result", {}).get("path") == path, res
        assert dumps == [{"path": path}] and registered == [True]
        assert link.registered and link.incoming_dir == daemon.incoming_dir and link.last_error is None
    finally:
        stop.set()
        link.close()
        link.thread.join(5)
    assert not link.thread.is_alive() and not link.connected


class _Steps:
    """A levels source: the steps measured and not drained yet, as
    StepLevels.params gives them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.measured, self.sent = 0, 0

    def measure(self, n):
        with self.lock:
            self.measured += n

    def __call__(self, n):
        with self.lock:
            lo, hi = self.sent, min(self.measured, self.sent + n)
            if hi <= lo:
                return None
            self.sent = hi
        return {"device": 0, "cap": 0, "dropped": 0, "levels": [{"step": i} for i in range(lo, hi)]}


@pytest.mark.fake_only
def test_a_snapshot_carries_the_steps_after_those_of_the_notifications_sent_before_it(daemon, tmp):
    """The daemon stores beside a snapshot the steps it has when the snapshot
    comes: steps drained for an agent.levels notification that still waits in
    the queue must reach it first (an OOM on the H200 kept steps 0-5 of 65:
    the notification with 6-63 went out after agent.captured)."""
    stop = threading.Event()
    facts = _facts(4243)
    steps = _Steps()
    link = _link.Link(daemon.socket, stop, facts=lambda: dict(facts), counters=lambda: None,
                      levels=steps, on_registered=lambda: None, on_dump=lambda *a: None)
    link.start()
    try:
        daemon.wait_register(pid=4243)
        for _ in range(20):  # each round: steps drained for a notification, more, then a snapshot
            steps.measure(6)
            link._send_levels()  # queued: the link's thread sends it within POLL
            steps.measure(5)
            params = {"path": os.path.join(daemon.incoming_dir, "x.part"), "reason": "oom"}
            link.request(_api.AGENT_CAPTURED, params, 10, levels=True)
        with daemon.cond:
            msgs = [m for _, m in daemon.messages if m.get("method") in (_api.AGENT_LEVELS, _api.AGENT_CAPTURED)]
        seen, snaps = [], 0
        for m in msgs:
            lv = m["params"] if m["method"] == _api.AGENT_LEVELS else m["params"].get("levels") or {}
            got = [e["step"] for e in lv.get("levels") or []]
            seen += got
            if m["method"] == _api.AGENT_CAPTURED:
                snaps += 1
                assert seen == list(range(len(seen))), "a snapshot came before steps drained earlier"
                assert got and seen[-1] == 11 * snaps - 1, (snaps, seen[-12:])
        assert snaps == 20
    finally:
        stop.set()
        link.close()
        link.thread.join(5)


class _Answers:
    """What Captures needs of a link, and what it answered."""
    incoming_dir = None
    registered = False

    def __init__(self):
        self.answers = []
        self.done = threading.Event()

    def respond(self, gen, rid, result=None, error=None, levels=False):
        self.answers.append((gen, rid, result, error))
        self.done.set()


class _NoLevels:
    def params(self, n=0):
        return None

    def on_oom(self):
        pass


def test_captures_refuse_a_dump_through_their_link(tmp):
    link = _Answers()
    link.incoming_dir = os.path.join(tmp, "incoming")
    c = _capture.Captures(link, os.getpid(), threading.Event(), lambda: None, _NoLevels(), lambda: 0)
    try:
        c.dump(3, 17, {"path": "/etc/passwd.part"})
        assert link.done.wait(5), "no answer to agent.dump"
        gen, rid, result, error = link.answers[0]
        assert (gen, rid, result) == (3, 17, None)
        assert error[0] == _api.CODE_INVALID_PARAMS and "outside the incoming dir" in error[1], error
    finally:
        c.close()
        c.worker.join(5)
    assert not c.worker.is_alive()
