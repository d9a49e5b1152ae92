"""Where each thread is: a daemon thread that samples the Python stacks of the
process's threads (sys._current_frames()) at a modest rate and sends them to
the daemon about once a second as one agent.stacks notification; the daemon
joins them with the GPU's utilisation (profiler/idle) to say which lines the
training thread was on while the GPU idled.

A sample keeps only the user's frames (file, line, function; at most
MAX_STACK_FRAMES, innermost first) and a wait marker decided here, once per
code object or source line: the DataLoader fetching or waiting on workers,
host-device syncs (torch.cuda.synchronize, printing a tensor, .item(),
.cpu(), .tolist(), .numpy() on the user's line), blocking copies, torch.save,
logging, torch.distributed collectives. Frames and threads are interned per
batch.

Cost: one walk of each thread's frames per tick, classified through caches;
the sampler never blocks the program: a late tick is skipped (and counted as
dropped), a full batch drops samples, and the agent's queue drops a batch it
cannot send. docs/idle.md has the cost measured on an H200.

VRAMSCOPE_STACK_HZ sets the rate (default 10; 0 or off: no sampler). At 25 Hz the
sampler's thread used 0.6-0.8% of a core in generation and a request loop on
the H200 (each tick's wake and the GIL it takes, more than the walk: ~10 us
on a 40-frame stack here); 10 Hz still puts ten samples in each of the
join's one-second windows.
"""
import os
import re
import sys
import sysconfig
import threading
import time

from .. import _api
from ._common import log

DEFAULT_HZ = 10.0
BATCH_S = 1.0
MAX_FRAMES = _api.MAX_STACK_FRAMES
MAX_SAMPLES = _api.MAX_STACK_SAMPLES

# Library frames that say what a thread waits on: (path fragment, function
# names or None for any, wait). The innermost match wins.
_LIB_WAITS = (
    ("torch/utils/data/dataloader.py", {"_get_data", "_try_get_data"}, "dataloader_workers"),
    ("torch/utils/data/dataloader.py", {"__next__"}, "dataloader"),
    ("torch/serialization.py", {"save"}, "checkpoint"),
    ("safetensors/torch.py", {"save_file", "save_model"}, "checkpoint"),
    ("torch/distributed/checkpoint/", None, "checkpoint"),
    ("torch/distributed/distributed_c10d.py", None, "collective"),
    ("torch/cuda/__init__.py", {"synchronize"}, "sync"),
    ("torch/cuda/streams.py", {"synchronize"}, "sync"),
    ("torch/_tensor_str.py", None, "sync"),
    ("torch/_tensor.py", {"__format__", "__repr__"}, "sync"),
    ("logging/__init__.py", None, "logging"),
    ("torch/utils/tensorboard/", None, "logging"),
    ("wandb/", None, "logging"),
)
# The user's own line, when the thread is in a C call on it.
_TEXT_WAITS = (
    (re.compile(r"\.(item|cpu|tolist|numpy)\(\s*\)|\.synchronize\("), "sync"),
    (re.compile(r"\.(cuda|to)\((?![^)]*non_blocking\s*=\s*True)"), "copy"),
    (re.compile(r"\bprint\(|\blog(ger)?\.(info|debug|warning|error)\(|\.log\("), "logging"),
)


def _library_dirs():
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            p = sysconfig.get_paths().get(key)
        except Exception:
            p = None
        if p:
            dirs.add(os.path.realpath(p) + os.sep)
            dirs.add(os.path.abspath(p) + os.sep)
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)  # vramscope itself
    return tuple(sorted(dirs))


def is_user_file(path, lib_dirs):
    """Whether a frame's file is the user's code (not the standard library, an
    installed package, the agent, or generated code)."""
    if not path:
        return False
    if path.startswith("<"):
        return path.startswith("<ipython-input")
    if "site-packages" in path or "dist-packages" in path:
        return False
    return not path.startswith(lib_dirs)


def lib_wait(path, func):
    p = path.replace("\\", "/")
    for frag, funcs, wait in _LIB_WAITS:
        if frag in p and (funcs is None or func in funcs):
            return wait
    return ""


def text_wait(source):
    for rx, wait in _TEXT_WAITS:
        if rx.search(source):
            return wait
    return ""


class Sampler:
    """Samples every thread's stack on its own daemon thread and hands a batch
    to send (a non-blocking callable: the agent's notify) about once a second."""

    def __init__(self, send, hz=DEFAULT_HZ):
        self.send = send
        self.period = 1.0 / hz
        self.stop = threading.Event()
        self.enabled = True  # False: ticks pass without sampling (the cost measurement's "off" blocks)
        self.running = threading.Event()  # cleared: the thread waits without ticking (pause)
        self.running.set()
        self.dropped = 0
        self.sent = 0  # samples handed to send
        self.cpu_ms = 0.0  # the sampler thread's CPU time, all batches
        self.thread = None
        self._lib_dirs = _library_dirs()
        # id(code) -> (code, user, wait): keyed by id, not by the code object, whose hash reads its whole
        # bytecode and constants each time (a sleeping sampler finds them out of the cache); holding the
        # code keeps it alive, so no other object can take its id
        self._codes = {}
        self._texts = {}  # (file, line) -> wait from the line's text
        self._skip = {}  # thread ident -> whether it is the agent's own (named vramscope-*)
        self._reset()

    def start(self):
        self.thread = threading.Thread(target=self._run, name="vramscope-stacks", daemon=True)
        self.thread.start()

    def _reset(self):
        self.batch_start = time.monotonic()
        self.cpu_start = time.thread_time()
        self.threads, self.thread_ix = [], {}
        self.frames, self.frame_ix = [], {}
        self.samples = []

    def _run(self):
        me = threading.get_ident()
        self.cpu_start = time.thread_time()  # this thread's CPU time from here
        nxt = time.monotonic()
        while True:
            if not self.running.is_set():  # paused: no wakes until resumed (or stopped)
                self.running.wait()
                nxt = time.monotonic()
            nxt += self.period
            late = time.monotonic() - nxt
            if late > 0:  # a late tick is skipped, never caught up
                missed = int(late / self.period) + 1
                self.dropped += missed
                nxt += missed * self.period
            time.sleep(max(0.0, nxt - time.monotonic()))  # cheaper than Event.wait's condition
            if self.stop.is_set():
                return
            try:
                if self.enabled:
                    self.sample(me)
                if time.monotonic() - self.batch_start >= BATCH_S:
                    self.flush()
            except Exception:  # a bug: never let it out, stop sampling
                log.warning("vramscope: stack sampler failed", exc_info=True)
                return

    def sample(self, me):
        frames = sys._current_frames()
        t = int(time.time() * 1000)
        main = threading.main_thread().ident
        try:
            for ident, f in frames.items():
                if ident == me or self._ours(ident):
                    continue
                stack, wait = self.walk(f)
                if not stack and not wait and ident != main:
                    continue  # a library thread (pin memory, tqdm): nothing of the user's
                if len(self.samples) >= MAX_SAMPLES:
                    self.dropped += 1
                    continue
                s = {"t": t, "th": self._thread(ident, main)}
                if stack:
                    s["s"] = stack
                if wait:
                    s["w"] = wait
                self.samples.append(s)
        finally:
            del frames

    def walk(self, f):
        """A frame's user frames (interned, innermost first) and wait marker."""
        stack, wait, text, below = [], "", "", False
        while f is not None:
            code = f.f_code
            info = self._codes.get(id(code))
            if info is None:
                info = self._codes[id(code)] = (code, is_user_file(code.co_filename, self._lib_dirs),
                                                lib_wait(code.co_filename, code.co_name))
            _, user, w = info
            if user:
                if len(stack) < MAX_FRAMES:
                    line = f.f_lineno or 0
                    if not stack and not below:
                        text = self._text(code.co_filename, line)
                    stack.append(self._frame(code.co_filename, line, code.co_name))
            else:
                below = below or not stack
                if w and not wait:
                    wait = w
            f = f.f_back
        return stack, wait or text

    def _text(self, path, line):
        key = (path, line)
        w = self._texts.get(key)
        if w is None:
            import linecache

            try:
                w = text_wait(linecache.getline(path, line).split("#", 1)[0])
            except Exception:
                w = ""
            self._texts[key] = w
        return w

    def _frame(self, path, line, func):
        key = (path, line, func)
        i = self.frame_ix.get(key)
        if i is None:
            i = self.frame_ix[key] = len(self.frames)
            self.frames.append({"file": path, "line": line, "func": func})
        return i

    def _thread(self, ident, main):
        i = self.thread_ix.get(ident)
        if i is None:
            i = self.thread_ix[ident] = len(self.threads)
            t = threading._active.get(ident)  # noqa: SLF001 (a lookup, no lock: the sampler must not block)
            th = {"name": getattr(t, "name", None) or "thread-%d" % ident}
            if ident == main:
                th["main"] = True
            self.threads.append(th)
        return i

    def _ours(self, ident):
        """Whether a thread is the agent's own (left out of the samples)."""
        ours = self._skip.get(ident)
        if ours is None:
            t = threading._active.get(ident)  # noqa: SLF001
            ours = self._skip[ident] = str(getattr(t, "name", "")).startswith("vramscope-")
        return ours

    def flush(self):
        if self.samples or self.dropped:
            cost = (time.thread_time() - self.cpu_start) * 1000
            self.cpu_ms += cost
            self.send(_api.AGENT_STACKS, {"period_ms": round(self.period * 1000, 3), "dropped": self.dropped,
                                          "cost_ms": round(cost, 3), "threads": self.threads,
                                          "frames": self.frames, "samples": self.samples})
            self.sent += len(self.samples)
            self.dropped = 0
        self._reset()


_sampler = None


def start(send):
    """Starts the sampler unless VRAMSCOPE_STACK_HZ is 0 or off; returns it (or None)."""
    global _sampler
    raw = os.environ.get("VRAMSCOPE_STACK_HZ", "").strip().lower()
    if raw in ("0", "off", "no", "false"):
        return None
    try:
        hz = float(raw) if raw else DEFAULT_HZ
    except ValueError:
        hz = DEFAULT_HZ
    hz = min(max(hz, 1.0), 100.0)
    if _sampler is not None and _sampler.thread is not None and _sampler.thread.is_alive():
        return _sampler
    _sampler = Sampler(send, hz)
    _sampler.start()
    return _sampler


def stop():
    global _sampler
    s, _sampler = _sampler, None
    if s is not None:
        s.stop.set()
        s.running.set()  # a paused thread wakes to see it


def pause(paused):
    """Stop the sampler's ticks (paused: its thread waits and never wakes)
    or start them again, keeping its caches (the cost measurement's off
    calls: _agent._parts). False without a sampler."""
    s = _sampler
    if s is None:
        return False
    s.running.clear() if paused else s.running.set()
    return True


def set_enabled(on):
    """Turns sampling on or off without stopping the thread (for measuring its cost)."""
    if _sampler is not None:
        _sampler.enabled = bool(on)


def sampler():
    return _sampler
