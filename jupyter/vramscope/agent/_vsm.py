"""VSM1: a snapshot as marshal chunks, the fast way out of the training process.

marshal.dumps is three times faster than pickle.dumps on a snapshot, and chunks
let the daemon decode a snapshot while it is still being written. The format
(profiler/marshal's package documentation is the reference; the Go reader
there reads it straight into the analysis):

    b"VSM1", then frames: kind (1 byte) | length (uint64 little-endian) | payload
      H  marshal.dumps(dict, 4): the snapshot dict without "device_traces"
      D  empty: starts the next device's trace list (device 0, 1, ... in order)
      C  marshal.dumps(list, 4): trace entries appended to the current device's list
      Z  empty: the end of the stream (a stream without it is truncated)

Each payload is an independent marshal. The stream stands for
{**H, "device_traces": [the C chunks of each D, concatenated]}. Standard
library only.
"""

import marshal
import struct

MAGIC = b"VSM1"
MARSHAL_VERSION = 4
_FRAME = struct.Struct("<cQ")  # kind, payload length
_READ_STEP = 64 << 20  # read payloads in steps, so a corrupt length allocates nothing


class VSMError(ValueError):
    """A stream that is not VSM1, is truncated, or holds a frame that does not decode."""


def write_vsm(snap, f, chunk_entries=50000):
    """Write snapshot dict `snap` to the binary file object `f` as VSM1.

    Device by device, `chunk_entries` trace entries per frame, so a reader can
    decode while the rest is still being written. Returns (bytes_written,
    trace_entries).
    """
    if not isinstance(snap, dict):
        raise TypeError("write_vsm needs a snapshot dict, not %s" % type(snap).__name__)
    if chunk_entries < 1:
        raise ValueError("chunk_entries must be at least 1")
    header = {k: v for k, v in snap.items() if k != "device_traces"}
    f.write(MAGIC)
    written = len(MAGIC) + _frame(f, b"H", marshal.dumps(header, MARSHAL_VERSION))
    entries = 0
    for trace in snap.get("device_traces") or ():
        written += _frame(f, b"D", b"")
        for i in range(0, len(trace), chunk_entries):
            written += _frame(f, b"C", marshal.dumps(trace[i:i + chunk_entries], MARSHAL_VERSION))
        entries += len(trace)
    written += _frame(f, b"Z", b"")
    return written, entries


def _frame(f, kind, payload):
    f.write(_FRAME.pack(kind, len(payload)))
    if payload:
        f.write(payload)
    return _FRAME.size + len(payload)


def read_vsm(f):
    """Read a VSM1 stream from the binary file object `f`; return the snapshot dict.

    Raises VSMError (with the byte offset) for anything but a whole VSM1 stream.
    """
    magic = f.read(len(MAGIC))
    if magic != MAGIC:
        if MAGIC.startswith(magic):
            raise VSMError("VSM1 stream truncated at byte %d: not even the magic" % len(magic))
        raise VSMError("not a VSM1 stream: it starts with %r, not %r" % (magic, MAGIC))
    off = len(MAGIC)
    header, traces = None, []
    while True:
        head = f.read(_FRAME.size)
        if len(head) < _FRAME.size:
            if not head:
                raise VSMError("VSM1 stream truncated at byte %d: it ends without its end frame 'Z'" % off)
            raise VSMError("VSM1 stream truncated at byte %d: inside a frame header" % (off + len(head)))
        kind, n = _FRAME.unpack(head)
        at, off = off, off + _FRAME.size
        payload = _read_exact(f, n, at, kind)
        off += n
        if kind == b"Z":
            if n:
                raise VSMError("VSM1 frame 'Z' at byte %d: payload of %d bytes, want none" % (at, n))
            break
        value = _frame_value(kind, payload, at, header is not None, bool(traces))
        if kind == b"H":
            header = value
        elif kind == b"D":
            traces.append([])
        else:
            traces[-1].extend(value)
    if header is None:
        raise VSMError("VSM1 frame 'Z' at byte %d: before the header frame 'H'" % at)
    return {**header, "device_traces": traces}


def _read_exact(f, n, at, kind):
    parts, left = [], n
    while left:
        b = f.read(min(left, _READ_STEP))
        if not b:
            raise VSMError("VSM1 stream truncated at byte %d: inside the %r frame of %d bytes at byte %d"
                           % (at + _FRAME.size + n - left, kind.decode("latin-1"), n, at))
        parts.append(b)
        left -= len(b)
    return b"".join(parts) if len(parts) != 1 else parts[0]


def _frame_value(kind, payload, at, have_header, have_device):
    """Check a frame against the ones before it and decode its payload."""
    name = kind.decode("latin-1")
    if kind not in (b"H", b"D", b"C"):
        raise VSMError("VSM1: unknown frame kind %r at byte %d" % (kind, at))
    if (kind == b"H") == have_header:
        raise VSMError("VSM1 frame %r at byte %d: %s" % (
            name, at, "a second header" if have_header else "before the header frame 'H'"))
    if kind == b"C" and not have_device:
        raise VSMError("VSM1 frame 'C' at byte %d: trace entries before the first device frame 'D'" % at)
    if kind == b"D":
        if payload:
            raise VSMError("VSM1 frame 'D' at byte %d: payload of %d bytes, want none" % (at, len(payload)))
        return None
    try:
        value = marshal.loads(payload)
    except (ValueError, EOFError, TypeError) as e:
        raise VSMError("VSM1 frame %r at byte %d: %s" % (name, at, e)) from None
    want = dict if kind == b"H" else list
    if type(value) is not want:
        raise VSMError("VSM1 frame %r at byte %d holds a %s, want a %s"
                       % (name, at, type(value).__name__, want.__name__))
    return value
