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
    _log("record", dict(enabled=enabled, context=context, stacks=stacks, max_entries=max_entries,
                        global_record_annotations=global_record_annotations), is_initialized())


def _snapshot(device=None):
    _log("_snapshot")
    return {"segments": [{"device": 0, "address": 1, "total_size": 4096, "allocated_size": 1000, "blocks": []},
                         {"device": 1, "address": 2, "total_size": 4096, "allocated_size": 7, "blocks": []}],
            "device_traces": [[{"action": "alloc", "size": 1}] * 3, [{"action": "free_completed"}] * 2],
            "external_annotations": []}


def _stat(value):
    def f(device=None):
        from . import is_initialized

        _log("counter", device)
        return value if is_initialized() else 0
    return f


memory_allocated = _stat(ALLOCATED)
memory_reserved = _stat(RESERVED)
max_memory_allocated = _stat(MAX_ALLOCATED)
