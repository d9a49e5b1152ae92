from . import _log

_observers = []


def _cuda_attach_out_of_memory_observer(cb):
    import torch

    if not torch.cuda._allocator_ready:
        raise RuntimeError("fake torch: allocator not initialised (attach the observer after CUDA init)")
    _log("attach_oom_observer")
    _observers.append(cb)


def _cuda_getDevice():
    import torch

    torch.cuda._lazy_init()
    return torch.cuda._device


def _cuda_isHistoryEnabled():
    import torch

    return torch.cuda.memory._history_enabled()


def _cuda_memoryStats(device):
    """The allocator's counters, nested as torch's (the agent's per-step levels read them)."""
    from .cuda import memory as m

    cur, res, peak = m.memory_allocated(device), m.memory_reserved(device), m.max_memory_allocated(device)
    return {"allocated_bytes": {"all": {"current": cur, "peak": peak}},
            "reserved_bytes": {"all": {"current": res, "peak": res}}}


def _cuda_resetPeakMemoryStats(device):
    from .cuda import memory as m

    m.reset_peak_memory_stats(device)
