import os
import sys

from .. import _log

ALLOCATED, RESERVED, MAX_ALLOCATED = 1000, 4096, 2000


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False, **kw):
    from . import is_initialized, _allocator_ready

    if kw or (global_record_annotations and os.environ.get("FAKE_TORCH_OLD")):
        raise TypeError("_record_memory_history() got an unexpected keyword argument")
    if enabled is not None and not _allocator_ready:
        raise RuntimeError("fake torch: recording before the allocator exists records nothing")
    rec = dict(enabled=enabled, context=context, stacks=stacks, max_entries=max_entries,
               global_record_annotations=global_record_annotations)
    if clear_history:
        rec["clear_history"] = True
    _log("record", rec, is_initialized())
    global _history
    if enabled is None:
        _history = None
    else:
        if _history is None or clear_history:
            del _trace[:]  # a new recording starts an empty history
            del _annotations[:]
        _history = dict(context=context, stacks=stacks, max_entries=max_entries, annotations=global_record_annotations)


# --- a fake allocator for the notebook tests ------------------------------------
# _fake_alloc / _fake_free record trace entries (with the caller's real Python
# stack, innermost first, as torch's "python" stacks) while the history is
# recorded; _snapshot() then returns a consistent snapshot of one 1 GiB segment,
# which the real engine analyses. FAKE_TORCH_SNAPSHOT=FILE: _snapshot() returns
# that pickle's contents instead.

_history = None  # the recording's settings while recording, else None
_trace = []
_annotations = []  # record_function scopes while recording with global_record_annotations
_live = {}  # address -> (size, frames)
_peak = [0]
_served = [0]  # allocations served (memory_stats' allocation.all.allocated)
SEGMENT_BASE, SEGMENT_SIZE = 0x7F0000000000, 1 << 30
_next = [SEGMENT_BASE]


def _history_enabled():
    return _history is not None


_frames = {}  # torch's symbolizer hands out one dict per distinct frame: pickles share them


def _stack(skip):
    import sys

    out = []
    f = sys._getframe(skip)
    while f is not None:
        key = (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        d = _frames.get(key)
        if d is None:
            d = _frames[key] = {"filename": key[0], "line": key[1], "name": key[2]}
        out.append(d)
        f = f.f_back
    return out


def _now_us():
    import time

    return int(time.time() * 1e6)


def _fake_alloc(size):
    """Allocates size bytes on device 0 (CUDA must be initialised); returns the address."""
    from . import _lazy_init

    _lazy_init()
    size = (int(size) + 511) // 512 * 512
    addr = _next[0]
    if addr + size > SEGMENT_BASE + SEGMENT_SIZE:
        raise MemoryError("fake torch: the 1 GiB segment is full")
    _next[0] += size
    _served[0] += 1
    frames = _stack(2)
    _live[addr] = (size, frames)
    _peak[0] = max(_peak[0], sum(v[0] for v in _live.values()))
    if _history is not None:
        _trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": _now_us(),
                       "frames": frames})
        _trim()
    return addr


def _fake_free(addr):
    size, _ = _live.pop(addr)
    if _history is not None:
        frames = _stack(2) if _history["context"] == "all" else []
        for action in ("free_requested", "free_completed"):
            _trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": _now_us(),
                           "frames": frames})
        _trim()


def _trim():
    over = len(_trace) - int(_history["max_entries"])
    if over > 0:
        del _trace[:over]


def _fake_snapshot():
    blocks, pos = [], SEGMENT_BASE
    for addr in sorted(_live):
        size, frames = _live[addr]
        if addr > pos:
            blocks.append({"address": pos, "size": addr - pos, "requested_size": 0, "state": "inactive", "frames": []})
        blocks.append({"address": addr, "size": size, "requested_size": size, "state": "active_allocated",
                       "frames": frames})
        pos = addr + size
    end = SEGMENT_BASE + SEGMENT_SIZE
    if pos < end:
        blocks.append({"address": pos, "size": end - pos, "requested_size": 0, "state": "inactive", "frames": []})
    used = sum(v[0] for v in _live.values())
    seg = {"device": 0, "address": SEGMENT_BASE, "total_size": SEGMENT_SIZE, "allocated_size": used,
           "active_size": used, "requested_size": used, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
    return {"segments": [seg], "device_traces": [[dict(e) for e in _trace]],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": "false"},
            "external_annotations": [dict(a) for a in _annotations]}


def _snapshot(device=None):
    _log("_snapshot")
    path = os.environ.get("FAKE_TORCH_SNAPSHOT")
    if path:
        import pickle

        with open(path, "rb") as f:
            return pickle.load(f)
    if _live or _trace:
        return _fake_snapshot()
    return {"segments": [{"device": 0, "address": 1, "total_size": 4096, "allocated_size": 1000, "blocks": []},
                         {"device": 1, "address": 2, "total_size": 4096, "allocated_size": 7, "blocks": []}],
            "device_traces": [[{"action": "alloc", "size": 1}] * 3, [{"action": "free_completed"}] * 2],
            "external_annotations": []}


# The device the fake's memory is on (FAKE_TORCH_MEMORY_ON, default 0): the
# others report nothing, as a real process's unused GPUs do.
_ON = int(os.environ.get("FAKE_TORCH_MEMORY_ON", "0"))


def _stat(value):
    def f(device=None):
        from . import is_initialized

        _log("counter", device)
        return value if is_initialized() and device in (None, _ON) else 0
    return f


def _live_bytes():
    return sum(v[0] for v in _live.values())


def memory_allocated(device=None):
    return _stat(ALLOCATED)(device) + (_live_bytes() if device in (None, _ON) else 0)


def memory_reserved(device=None):
    return _stat(RESERVED)(device) + (SEGMENT_SIZE if (_live or _peak[0]) and device in (None, _ON) else 0)


_max_base = [MAX_ALLOCATED]  # reset_peak_memory_stats lowers the fake's peak to what is allocated


def max_memory_allocated(device=None):
    return _stat(_max_base[0])(device) + (_peak[0] if device in (None, _ON) else 0)


def reset_peak_memory_stats(device=None):
    _log("reset_peak", device)
    _max_base[0] = ALLOCATED
    _peak[0] = _live_bytes()


def memory_stats(device=None):
    """The one counter the agent's sampling clock reads."""
    from . import is_initialized

    return {"allocation.all.allocated": _served[0]} if is_initialized() and device in (None, _ON) else {}


_fraction = {}  # device -> the per-process memory fraction set


def set_per_process_memory_fraction(fraction, device=None):
    _fraction[_ON if device is None else int(device)] = float(fraction)


def get_per_process_memory_fraction(device=None):
    return _fraction.get(_ON if device is None else int(device), 1.0)
