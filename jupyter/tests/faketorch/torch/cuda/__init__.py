import os
import threading
import traceback

from .. import _log

_initialized = False
_allocator_ready = False
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls = []
_device = 0
_init_thread = None


class OutOfMemoryError(RuntimeError):
    pass


def is_initialized():
    return _initialized


def is_available():
    _log("is_available")  # the agent must not call this (it poisons fork)
    return device_count() > 0


def device_count():
    return 0 if os.environ.get("FAKE_TORCH_CPU") else 2


def _device_count_nvml():
    return device_count()


def _lazy_call(callable, **kwargs):
    # like torch >= 2.x: under the (non-reentrant) init lock; a timeout instead of a deadlock
    if not _initialization_lock.acquire(timeout=5):
        raise RuntimeError("fake torch: _lazy_call deadlocked (called from inside CUDA init?)")
    try:
        _log("_lazy_call", is_initialized())
        if is_initialized():
            callable()
        else:
            _queued_calls.append((callable, traceback.format_stack()))
    finally:
        _initialization_lock.release()


def _lazy_init():
    global _initialized, _allocator_ready, _init_thread
    if is_initialized() or hasattr(_tls, "is_initializing"):
        return
    if os.environ.get("FAKE_TORCH_CPU"):
        raise AssertionError("Torch not compiled with CUDA enabled")
    if not _initialization_lock.acquire(timeout=5):
        raise RuntimeError("fake torch: init lock held")
    try:
        if is_initialized():
            return
        _log("cuda_init", threading.current_thread().name)
        _init_thread = threading.current_thread().name
        _allocator_ready = True
        _tls.is_initializing = True
        try:
            for fn, _tb in _queued_calls:
                fn()
        finally:
            del _tls.is_initializing
        _initialized = True
    finally:
        _initialization_lock.release()


def init():
    _lazy_init()


def current_device():
    _lazy_init()
    return _device


class _Properties:
    def __init__(self, index):
        self.name = "Fake H200"
        self.uuid = "0000000%d-1edc-5c0a-7a0b-fc688ee35bbc" % index  # torch's form: no "GPU-"
        self.total_memory = 150754820096  # an H200's, as torch reports it


def get_device_properties(d=None):
    _lazy_init()
    return _Properties(_device if d is None else d)


def set_device(d):
    global _device
    _lazy_init()
    _device = d


from . import memory  # noqa: E402,F401 (torch.cuda.memory, as torch has it)
from .memory import memory_allocated, memory_reserved, max_memory_allocated, memory_stats, reset_peak_memory_stats  # noqa: E402,F401
from .memory import set_per_process_memory_fraction  # noqa: E402,F401
