"""A tiny fake `torch` for the agent's tests: it logs, in order, every call the
agent makes into it (torch._calls), and imitates the parts of real torch the
agent depends on — CUDA's lazy initialisation with its queue of _lazy_call
callbacks (run with is_initialized() still False and the non-reentrant init lock
held, as torch >= 2.x does), the allocator's history recording, snapshots, the
out-of-memory observer, Tensor.backward calling torch.autograd.backward, and
record_function scopes.

Env: FAKE_TORCH_OLD=1 — _record_memory_history has no global_record_annotations
(older torch); FAKE_TORCH_CPU=1 — a CPU-only build (version.cuda is None).
"""
import os

__version__ = "2.99.0+fake"
_calls = []


def _log(*item):
    _calls.append(item)


class version:
    cuda = None if os.environ.get("FAKE_TORCH_CPU") else "12.8"
    hip = None


from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import autograd  # noqa: E402


class Tensor:
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        _log("Tensor.backward", tuple(autograd.profiler._stack))
        # like torch/_tensor.py: looks torch.autograd.backward up at call time
        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _fake_oom(device=0, alloc=1 << 30, total=80 << 30, free=1 << 20):
    """What the caching allocator does when cudaMalloc fails: call the observers, then raise."""
    _log("oom_begin")
    for cb in list(_C._observers):
        cb(device, alloc, total, free)
    _log("oom_end")
    raise cuda.OutOfMemoryError("CUDA out of memory (fake)")
