"""torch.optim's global optimizer-step post-hooks (torch >= 2.0), and a fake step.
FAKE_TORCH_NO_STEP_HOOK=1: a torch without them."""
import os

from .. import _log

_post_hooks = {}
_next = [0]

if os.environ.get("FAKE_TORCH_NO_STEP_HOOK"):
    raise ImportError("fake torch: no torch.optim.optimizer")


class _Handle:
    def __init__(self, key):
        self.key = key

    def remove(self):
        _post_hooks.pop(self.key, None)


def register_optimizer_step_post_hook(hook):
    _next[0] += 1
    _post_hooks[_next[0]] = hook
    return _Handle(_next[0])


def _fake_step(opt=None):
    """What Optimizer.step does at its end: call the global post-hooks (opt, args, kwargs)."""
    _log("step")
    for h in list(_post_hooks.values()):
        h(opt, (), {})
