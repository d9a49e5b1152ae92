"""vramscope/agent/_vsm.py: the VSM1 writer and reader (profiler/marshal reads the same streams in Go)."""
import glob
import io
import os
import pickle
import struct
import time

import pytest

from conftest import ROOT
from vramscope.agent._vsm import MAGIC, VSMError, read_vsm, write_vsm

SNAPSHOTS = sorted(glob.glob(os.path.join(ROOT, "examples", "snapshots", "*.pickle"))
                   + glob.glob(os.path.join(ROOT, "examples", "snapshots", "findings", "*.pickle")))


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def frames(data):
    """(kind, offset, payload length) of each frame of a stream."""
    out, off = [], len(MAGIC)
    while off < len(data):
        kind, n = struct.unpack_from("<cQ", data, off)
        out.append((kind, off, n))
        off += 9 + n
    return out


@pytest.mark.parametrize("path", SNAPSHOTS, ids=os.path.basename)
def test_round_trip(path):
    snap = load(path)
    buf = io.BytesIO()
    written, entries = write_vsm(snap, buf, chunk_entries=1000)
    data = buf.getvalue()
    assert written == len(data) and data.startswith(MAGIC)
    assert entries == sum(len(t) for t in snap["device_traces"])
    assert read_vsm(io.BytesIO(data)) == snap


def test_layout():
    snap = {"segments": [], "device_traces": [[{"action": "alloc", "i": i} for i in range(5)], [], [{"action": "oom"}]]}
    buf = io.BytesIO()
    write_vsm(snap, buf, chunk_entries=2)
    data = buf.getvalue()
    kinds = b"".join(k for k, _, _ in frames(data))
    # header; device 0 in chunks of 2, 2, 1; device 1 empty; device 2; end
    assert kinds == b"HDCCCDDCZ"
    assert [n for k, _, n in frames(data) if k in b"DZ"] == [0, 0, 0, 0]
    assert read_vsm(io.BytesIO(data)) == snap


def test_no_device_traces():
    buf = io.BytesIO()
    assert write_vsm({"segments": [1]}, buf) == (len(buf.getvalue()), 0)
    assert b"".join(k for k, _, _ in frames(buf.getvalue())) == b"HZ"
    assert read_vsm(io.BytesIO(buf.getvalue())) == {"segments": [1], "device_traces": []}


def test_truncated_everywhere():
    snap = load(SNAPSHOTS[0])
    buf = io.BytesIO()
    write_vsm(snap, buf, chunk_entries=500)
    data = buf.getvalue()
    cuts = [off for _, off, _ in frames(data)] + [off + 5 for _, off, _ in frames(data)]
    cuts += list(range(0, len(data), max(1, len(data) // 97)))
    for n in sorted(set(cuts)):
        if n >= len(data):
            continue
        with pytest.raises(VSMError, match="truncated"):
            read_vsm(io.BytesIO(data[:n]))


def test_bad_streams():
    def stream(*parts):
        out = MAGIC
        for kind, payload in parts:
            out += struct.pack("<cQ", kind, len(payload)) + payload
        return out
    h = b"{0"  # marshal of {}
    cases = [
        (b"\x80\x04\x95", "not a VSM1 stream"),
        (stream((b"D", b""), (b"Z", b"")), "before the header frame"),
        (stream((b"H", h), (b"H", h), (b"Z", b"")), "a second header"),
        (stream((b"H", h), (b"C", b"[\x00\x00\x00\x00"), (b"Z", b"")), "before the first device frame"),
        (stream((b"H", h), (b"X", b""), (b"Z", b"")), "unknown frame kind"),
        (stream((b"H", b"N"), (b"Z", b"")), "holds a NoneType, want a dict"),
        (stream((b"H", b"c\x00"), (b"Z", b"")), "frame 'H' at byte 4"),
        (stream((b"H", h), (b"Z", b"N")), "payload of 1 bytes"),
    ]
    for data, msg in cases:
        with pytest.raises(VSMError, match=msg):
            read_vsm(io.BytesIO(data))


def test_writer_checks_its_input():
    with pytest.raises(TypeError):
        write_vsm([{"segments": []}], io.BytesIO())
    with pytest.raises(ValueError):
        write_vsm({}, io.BytesIO(), chunk_entries=0)


def test_stream_to_a_fifo_nobody_reads_gives_up(tmp_path):
    """The agent's stream into the daemon's FIFO: with no reader it gives up
    (the caller writes the pickle instead) rather than block every later capture."""
    import threading

    from vramscope.agent._snapfile import _stream_snapshot

    fifo = str(tmp_path / "x.part.fifo")
    os.mkfifo(fifo)
    snap = load(os.path.join(ROOT, "examples", "snapshots", "cuda_graph.pickle"))
    t = time.monotonic()
    assert _stream_snapshot(fifo, snap) is None
    assert 1.5 < time.monotonic() - t < 10
    # With a reader, the stream is the snapshot.
    got = {}

    def read():
        with open(fifo, "rb") as f:
            got["snap"] = read_vsm(f)

    r = threading.Thread(target=read)
    r.start()
    size, entries = _stream_snapshot(fifo, snap)
    r.join(10)
    assert got["snap"] == snap and entries == sum(len(x) for x in snap["device_traces"]) and size > 0
