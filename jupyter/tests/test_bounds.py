"""The agent's bounds against a misbehaving daemon (hardening): the reader's
cost is linear in what arrives and one message is at most MAX_LINE, and the
worker's queue holds few agent.dump requests and puts an out-of-memory
capture first."""
import socket
import threading
import time

import pytest

from vramscope.agent import _capture, _common, _link


def reader(sock):
    """A Link with just what _read needs, on one end of a socket pair."""
    r = object.__new__(_link.Link)
    r.sock, r.poller, r.buf, r.lock = sock, None, bytearray(), threading.Lock()
    r.lines = []
    r._dispatch = r.lines.append
    return r


def test_lines_split_across_reads():
    a, b = socket.socketpair()
    r = reader(a)
    msg = b'{"id":1}\n{"id":2}\n{"id"'
    b.sendall(msg)
    r._read(1.0)
    b.sendall(b':3}\n\n{"id":4}\n')
    while len(r.lines) < 3:
        r._read(1.0)
    assert r.lines == [b'{"id":1}', b'{"id":2}', b'{"id":3}', b'{"id":4}'][:len(r.lines)]
    assert bytes(r.buf) == b""


def test_a_message_over_max_line_disconnects_without_rescanning():
    a, b = socket.socketpair()
    r = reader(a)
    chunk = b"x" * (1 << 16)
    sent = 0

    def send():
        nonlocal sent
        try:
            while sent <= _common.MAX_LINE + (1 << 17):
                b.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
    t = threading.Thread(target=send, daemon=True)
    t.start()
    t0 = time.perf_counter()
    with pytest.raises(_link._Disconnected, match="too long"):
        while True:
            r._read(1.0)
    took = time.perf_counter() - t0
    assert r.lines == []
    assert took < 5.0, took  # linear: a few MiB of finds, not a rescan per chunk
    a.close()
    b.close()


def test_dump_requests_are_bounded_and_a_capture_goes_first():
    q = _capture.Jobs()
    for i in range(_common.MAX_DUMPS_QUEUED):
        assert q.put(("dump", 1, i, {}))
    assert not q.put(("dump", 1, 99, {})), "a fifth queued dump was taken"
    assert q.put(("handover",))
    assert q.put(("capture", "snap", {}, 1.0))
    assert q.get()[0] == "capture"
    assert [q.get()[0] for _ in range(q.qsize())] == ["dump"] * _common.MAX_DUMPS_QUEUED + ["handover"]
    assert q.put(("dump", 1, 100, {})), "room again once the worker took them"
