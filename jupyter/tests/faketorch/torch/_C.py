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
