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


@pytest.mark.fake_only
def test_a_link_alone_registers_sends_counters_and_hands_over_dumps(daemon, tmp):
    stop = threading.Event()
    registered, dumps = [], []
    facts = {"pid": 4242, "host": "h", "rank": 0, "local_rank": 0, "world_size": 1, "argv": ["t.py"],
             "python": "3.12.0", "device": 0, "recording": False, "max_entries": 1,
             "api_version": _api.API_VERSION}
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


class _Answers:
    """What Captures needs of a link, and what it answered."""
    incoming_dir = None
    registered = False

    def __init__(self):
        self.answers = []
        self.done = threading.Event()

    def respond(self, gen, rid, result=None, error=None):
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
