"""Everything the agent does to torch, and only once the program has imported it.

Rules kept here:
- never initialise CUDA: anything that needs it waits for torch's own CUDA
  initialisation through torch.cuda._lazy_call (run at init, before the first
  allocation), and nothing here calls torch.cuda.is_available() or
  current_device() before CUDA is initialised;
- a callback torch runs for us (CUDA init, out of memory) never raises.
"""
import functools
import importlib
import logging
import os
import sys
import threading
import time

log = logging.getLogger("vramscope")


def imported():
    """The torch module if the program has imported it (fully), else None."""
    t = sys.modules.get("torch")
    if t is None or getattr(t, "cuda", None) is None:
        return None
    return t


def installed():
    """Whether torch could be imported, without importing it."""
    if imported() is not None:
        return True
    if "torch" in sys.modules and sys.modules["torch"] is None:  # import blocked
        return False
    try:
        import importlib.util

        return importlib.util.find_spec("torch") is not None
    except Exception:
        return False


def versions(torch):
    """(torch version, CUDA version or "")."""
    v = getattr(torch, "version", None)
    return str(getattr(torch, "__version__", "") or ""), str(getattr(v, "cuda", None) or "")


def cuda_initialized(torch):
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def cuda_unavailable(torch):
    """True when CUDA surely cannot be used here, found without initialising it:
    a CPU-only build, NVML counting no device, or no NVIDIA driver at all.
    (torch.cuda.is_available() would call cudaGetDeviceCount, which makes a
    later fork unable to use CUDA; NVML does not.)"""
    if cuda_initialized(torch):
        return False
    v = getattr(torch, "version", None)
    if getattr(v, "cuda", None) is None and getattr(v, "hip", None) is None:
        return True  # built without CUDA
    if getattr(v, "hip", None):
        return False  # ROCm: we cannot tell cheaply; let it try
    n = None
    count = getattr(torch.cuda, "_device_count_nvml", None)
    if count is not None:
        try:
            n = int(count())
        except Exception:
            n = None
    if n == 0:
        return True
    if n is None or n < 0:
        return not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl"))
    return False


def on_cuda_init(torch, fn):
    """Run fn when torch initialises CUDA (torch.cuda._lazy_call: before the first
    allocation), or now when it already has. Returns "now", "queued" or None when
    it could not be arranged. fn runs inside torch's CUDA initialisation, where
    torch.cuda.is_initialized() is still False and torch's init lock is held:
    it must not call _lazy_call itself, and must not raise."""
    cuda = torch.cuda
    try:
        was = bool(cuda.is_initialized())
        cuda._lazy_call(fn)
        return "now" if was else "queued"
    except Exception:
        log.debug("torch.cuda._lazy_call failed", exc_info=True)
        if cuda_initialized(torch):
            fn()
            return "now"
        return None


def _off(name):
    return os.environ.get(name, "").strip().lower() in ("0", "false", "no", "off")


# Whether the allocator's history is on because start_recording turned it on:
# the backward wrapper annotates only then (a record_function costs ~0.1 ms a
# backward call, and between sampled windows nothing would keep its mark).
recording = [False]


def start_recording(torch, max_entries, stacks, clear=False):
    """Start the allocator's history (clear: with an empty one). Returns whether
    record_function annotations are recorded too (global_record_annotations;
    older torch lacks it)."""
    mem = torch.cuda.memory
    # VRAMSCOPE_CONTEXT: which trace entries carry a stack. "alloc" (frees
    # without one: the engine attributes by the allocation's stack) or "all".
    context = os.environ.get("VRAMSCOPE_CONTEXT", "alloc")
    if context not in ("all", "alloc", "state"):
        context = "all"
    annotations = not _off("VRAMSCOPE_ANNOTATIONS")
    kw = dict(enabled="all", context=context, stacks=stacks, max_entries=max_entries)
    if clear:
        kw["clear_history"] = True
    if not annotations:
        mem._record_memory_history(**kw)
        recording[0] = True
        return False
    try:
        mem._record_memory_history(global_record_annotations=True, **kw)
        recording[0] = True
        return True
    except TypeError:
        mem._record_memory_history(**kw)
        recording[0] = True
        return False


def stop_recording(torch):
    recording[0] = False
    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except Exception:
        log.debug("could not stop recording", exc_info=True)


def register_step_hook(torch, fn, direct=False):
    """torch.optim's global post-hook of every optimizer's step (torch >= 2.0);
    returns its handle, or None where torch has none.

    A step inside a backward() is an optimizer in backward (one optimizer per
    parameter stepping in its gradient hook, as torchtune's optimizer_in_bwd
    does): the training step is the backward, so fn runs once, as the
    outermost backward ends (_backward_exit), not once per parameter.
    direct: torch calls fn itself (no frame of ours between), and fn does
    that: while backward_depth[0], it calls defer(fn) and returns."""
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except Exception:
        return None
    depth = backward_depth

    def hook(opt, args, kwargs):
        if depth[0]:
            return defer(fn)
        return fn(opt, args, kwargs)

    if direct:
        hook = fn

    try:
        return _StepHandle(register_optimizer_step_post_hook(hook), fn)
    except Exception:
        log.debug("could not hook optimizer steps", exc_info=True)
        return None


class _StepHandle:
    """torch's handle of a step hook; removing it also drops fn's deferred call."""

    def __init__(self, handle, fn):
        self.handle, self.fn = handle, fn

    def remove(self):
        _deferred.pop(self.fn, None)
        self.handle.remove()


_oom_attached = False


def attach_oom_observer(torch, callback):
    """torch._C._cuda_attach_out_of_memory_observer, once per process (torch has
    no way to detach one: the callback itself checks whether an agent wants it).
    Needs the allocator initialised, so call it from the CUDA-init callback."""
    global _oom_attached
    if _oom_attached:
        return True
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return False
    attach(callback)
    _oom_attached = True
    return True


def counters(torch, index):
    """(allocated, reserved, peak allocated) of torch's caching allocator on a
    device, in one read of its counters (torch._C._cuda_memoryStats; the
    public calls flatten the whole stats dict in Python, once each). The peak
    is the allocator's own, which the step levels reset at each read:
    StepLevels.peak makes it max_memory_allocated's. Zeros (and CUDA left
    alone) before CUDA is initialised."""
    if not cuda_initialized(torch):
        return 0, 0, 0
    raw = getattr(getattr(torch, "_C", None), "_cuda_memoryStats", None)
    if raw is None:
        c = torch.cuda
        return int(c.memory_allocated(index)), int(c.memory_reserved(index)), int(c.max_memory_allocated(index))
    s = raw(index)
    a = s["allocated_bytes"]["all"]
    return int(a["current"]), int(s["reserved_bytes"]["all"]["current"]), int(a["peak"])


def allocations(torch, index):
    """How many allocations torch's caching allocator has served on a device
    since the process began (the sampling clock's warm-up counts them), or -1."""
    try:
        return int(torch.cuda.memory_stats(index).get("allocation.all.allocated", -1))
    except Exception:
        return -1


def used_device(torch):
    """The device this process holds memory on (the most reserved), by CUDA's
    numbering, or None before it holds any or before CUDA is up. Asked of the
    allocator, so right whatever LOCAL_RANK or CUDA_VISIBLE_DEVICES say."""
    if not cuda_initialized(torch):
        return None
    best, most = None, 0
    try:
        for i in range(int(torch.cuda.device_count())):
            r = counters(torch, i)[1]
            if r > most:
                best, most = i, r
    except Exception:
        return None
    return best


def device_uuid(torch, index):
    """The UUID of a device ("ab0427df-…"; NVML writes "GPU-ab0427df-…"), or
    "" (never initialises CUDA: only once it is up)."""
    if index is None or index < 0 or not cuda_initialized(torch):
        return ""
    try:
        return str(torch.cuda.get_device_properties(index).uuid)
    except Exception:
        return ""


def torch_index(torch, local_rank, init_device):
    """The device index to ask torch about (its current device is per thread, so
    the agent's thread cannot just ask): the one holding memory, else LOCAL_RANK
    when it is a valid index, else the device current when CUDA was
    initialised, else 0."""
    used = used_device(torch)
    if used is not None:
        return used
    try:
        n = int(torch.cuda.device_count())
    except Exception:
        return None
    for d in (local_rank, init_device):
        if d is not None and 0 <= d < n:
            return d
    return 0 if n > 0 else None


# --- backward annotation -------------------------------------------------------

_tls = threading.local()
_wrapped = []  # (owner, attribute, wrapper)
_annotating = [False]
backward_site = [None]  # (file, line) of the backward() call running now, for any thread to read
# Held by every wrapped backward() and torch.autograd.grad call while it runs,
# and by the tensor walk of a snapshot the daemon asked for when it runs on
# the worker thread beside the user's step (a program without optimizer
# steps, or none ended in time; else it runs at a step's end, _capture's
# _walk_beside): the walk reads saved tensors, graph nodes and .grad, which
# autograd's threads release and replace during backward, without the GIL. Read during a
# backward, they crashed a GPT-2 loop on the H200 (free(): invalid pointer,
# 0.15 s after a memory warning's snapshot, 2026-12-03). A backward that
# comes during a walk waits for it (once per snapshot, ~0.2 s); a walk waits
# for the backward running. The OOM observer's walk runs inside the failing
# call and takes no lock. Only the outermost backward takes it: a backward
# inside a backward (reentrant checkpointing runs one on autograd's thread)
# must not wait for its own caller.
graph_lock = threading.Lock()
_depth_lock = threading.Lock()
backward_depth = [0]  # backward() calls running, all threads


def _backward_enter():
    """True when this call is the outermost backward and took graph_lock."""
    with _depth_lock:
        outer = backward_depth[0] == 0
        backward_depth[0] += 1
    if outer:
        graph_lock.acquire()
    return outer


def _backward_exit(outer):
    with _depth_lock:
        backward_depth[0] -= 1
    if outer:
        graph_lock.release()
        if _deferred:
            _run_deferred()


# Step hooks an optimizer step inside a backward() called (register_step_hook):
# each runs once as the outermost backward ends, on the thread that called it.
_deferred = {}


def defer(fn):
    """A direct step hook called inside a backward(): fn runs as it ends."""
    _deferred[fn] = True


def _run_deferred():
    fns = list(_deferred)
    _deferred.clear()
    for fn in fns:
        try:
            fn(None, (), {})
        except Exception:
            log.debug("vramscope: a step hook after backward() failed", exc_info=True)


def walk_lock(timeout):
    """graph_lock for a walk beside the user's step, with no backward running
    on any thread; False after timeout seconds."""
    end = time.monotonic() + timeout
    while graph_lock.acquire(timeout=max(0.0, end - time.monotonic())):
        if backward_depth[0] == 0:
            return True
        graph_lock.release()  # a backward that began beside the outer one's end
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)
    return False


def wrap_backward(torch):
    """Run each torch.Tensor.backward / torch.autograd.backward call inside
    record_function("vramscope.backward@FILE:LINE") of its caller, so that the
    allocator's external_annotations mark when the backward of that line ran;
    they and torch.autograd.grad hold graph_lock while they run."""
    _annotating[0] = True
    if _wrapped:
        return
    for owner, attr, wrap in ((torch.Tensor, "backward", _backward_wrapper), (torch.autograd, "backward", _backward_wrapper),
                              (torch.autograd, "grad", _grad_wrapper)):
        orig = getattr(owner, attr, None)
        if orig is None or getattr(orig, "__vramscope__", False):
            continue
        w = wrap(orig, torch)
        setattr(owner, attr, w)
        _wrapped.append((owner, attr, w))


# Seconds the backward wrapper itself took (its annotation, not the backward
# pass): part of what the agent costs the training thread.
wrapper_s = [0.0]


def unwrap_backward():
    _annotating[0] = False  # a wrapper someone else has wrapped stays, but passes through
    while _wrapped:
        owner, attr, w = _wrapped.pop()
        if getattr(owner, attr, None) is w:
            setattr(owner, attr, w.__wrapped__)


def _record_function(torch):
    prof = getattr(torch.autograd, "profiler", None)
    rf = getattr(prof, "record_function", None)
    if rf is None:
        rf = importlib.import_module("torch.autograd.profiler").record_function
    return rf


def _backward_wrapper(orig, torch):
    rf = []

    @functools.wraps(orig)
    def backward(*args, **kwargs):
        # Tensor.backward calls torch.autograd.backward: annotate the outer call only.
        if not _annotating[0] or getattr(_tls, "active", False):
            return orig(*args, **kwargs)
        t0 = time.perf_counter()
        cm = None
        f = None
        try:
            f = sys._getframe(1)
            if recording[0]:
                if not rf:
                    rf.append(_record_function(torch))
                cm = rf[0]("vramscope.backward@%s:%d" % (f.f_code.co_filename, f.f_lineno))
                cm.__enter__()
        except Exception:
            cm = None
        _tls.active = True
        site = backward_site[0]
        try:
            backward_site[0] = (f.f_code.co_filename, f.f_lineno)
        except Exception:
            pass
        t1 = time.perf_counter()
        outer = _backward_enter()
        try:
            return orig(*args, **kwargs)
        finally:
            _backward_exit(outer)
            t2 = time.perf_counter()
            _tls.active = False
            backward_site[0] = site
            if cm is not None:
                try:
                    cm.__exit__(None, None, None)
                except Exception:
                    pass
            wrapper_s[0] += (t1 - t0) + (time.perf_counter() - t2)

    backward.__vramscope__ = True
    return backward


def _grad_wrapper(orig, _torch_module):
    """torch.autograd.grad runs a backward pass too (gradient penalties,
    higher-order gradients): it holds graph_lock like backward(), without an
    annotation (torch.compile's tracing calls it, and must see no profiler
    call)."""

    @functools.wraps(orig)
    def grad(*args, **kwargs):
        if not _annotating[0]:
            return orig(*args, **kwargs)
        outer = _backward_enter()
        try:
            return orig(*args, **kwargs)
        finally:
            _backward_exit(outer)

    grad.__vramscope__ = True
    return grad
