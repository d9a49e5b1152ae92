"""An attention-bias helper that keeps every bias it builds in a module-level
dict, one per (heads, length, offset): imported by global_cache.py, whose
offsets change every step, so the dict grows until the device is full."""
import torch

_CACHE = {}


def bias(heads, length, offset, device="cuda"):
    """A (heads, length, 4096) additive bias for the given length and offset, built once."""
    key = (heads, length, offset)
    if key not in _CACHE:
        pos = torch.arange(length, device=device, dtype=torch.float32)[:, None] + offset
        _CACHE[key] = (pos - torch.arange(4096, device=device)).abs().neg().expand(heads, -1, -1).contiguous()
    return _CACHE[key]
