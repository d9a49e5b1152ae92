"""A positional-table module that caches one sinusoidal table per (length,
scale) in a class attribute: imported by class_cache.py, whose scale changes
every step."""
import math

import torch


class PositionTable:
    _tables = {}

    @classmethod
    def get(cls, length, scale, dim=8192, device="cuda"):
        key = (length, scale)
        if key not in cls._tables:
            pos = torch.arange(length, device=device, dtype=torch.float32)[:, None] * scale
            freq = torch.exp(torch.arange(0, dim, 2, device=device) * (-math.log(10000.0) / dim))
            cls._tables[key] = torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=-1)
        return cls._tables[key]
