"""Taking a snapshot and writing it: torch's own _snapshot() (or the test hook's
file), pickled with protocol 4, synced."""
import errno
import gc
import os
import pickle
import shutil
import time

from . import _torch
from ._common import (
    AgentError,
)


class _FileSnapshot:
    """The VRAMSCOPE_TEST_SNAPSHOT test hook: copy this file instead of pickling torch's snapshot."""

    def __init__(self, path):
        self.path = path


def _take_snapshot():
    """torch.cuda.memory._snapshot(), or the test hook's file."""
    test = os.environ.get("VRAMSCOPE_TEST_SNAPSHOT")
    if test:
        return _FileSnapshot(test)
    torch = _torch.imported()
    if torch is None:
        raise AgentError("torch is not imported in this process: there is no allocator snapshot to take")
    if not _torch.cuda_initialized(torch):
        raise AgentError("CUDA is not initialised in this process: there is no allocator snapshot to take")
    # _snapshot() builds millions of dicts and lists: with the cyclic GC on,
    # they trigger full collections of the whole process's heap on the way
    # (1.91 s -> 1.56 s for 1M entries on the H200 host, docs/gpu/probe-capture.json).
    # None of them can form a cycle; the collector runs again once it is back on.
    with _gc_paused():
        return torch.cuda.memory._snapshot()


class _gc_paused:
    def __enter__(self):
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was:
            gc.enable()


def _entries(snap):
    try:
        return sum(len(t) for t in snap.get("device_traces") or ())
    except Exception:
        return -1


def _allocated_from_segments(snap, device):
    try:
        return sum(int(s.get("allocated_size", 0)) for s in snap.get("segments") or ()
                   if s.get("device", device) == device)
    except Exception:
        return -1


def _write_snapshot(path, snap):
    """Write a snapshot to path (pickle protocol 4, or the test file's bytes), flush
    and fsync. Returns (bytes, entries). Removes the file on failure."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(snap, _FileSnapshot):
                with open(snap.path, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 20)
                entries = -1
            elif isinstance(snap, (bytes, bytearray)):
                f.write(snap)
                entries = -1
            else:
                pickle.dump(snap, f, protocol=4)
                entries = _entries(snap)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    return size, entries


def _move(src, dst):
    """os.replace, or copy + fsync + unlink across file systems."""
    try:
        os.replace(src, dst)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    with open(src, "rb") as s, open(dst, "wb") as d:
        shutil.copyfileobj(s, d, 1 << 20)
        d.flush()
        os.fsync(d.fileno())
    os.unlink(src)


def _open_stream(fifo, wait=2.0):
    """Open the daemon's FIFO for writing, or None when no reader holds it open
    within `wait` seconds (the daemon gave up, or died): a blocking open would
    then wait forever, and with it every later capture."""
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(fifo, flags)
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
            continue
        os.set_blocking(fd, True)
        return fd


def _stream_snapshot(fifo, snap, phases=None):
    """Write a snapshot into the daemon's FIFO as VSM1 (marshal chunks: 3x faster
    than pickling, and the daemon analyses it as it arrives). Returns (bytes,
    entries), or None when the daemon is not reading it (write the pickle then).
    phases, a dict, gets "open": the milliseconds the FIFO took to open."""
    from ._vsm import write_vsm

    t = time.perf_counter()
    fd = _open_stream(fifo)
    if phases is not None:
        phases["open"] = round((time.perf_counter() - t) * 1000.0, 3)
    if fd is None:
        return None
    with os.fdopen(fd, "wb", buffering=1 << 20) as f:
        # Small chunks: the daemon decodes each while the next is marshalled,
        # and what is left to decode after the last one is short.
        return write_vsm(snap, f, chunk_entries=8192)
