"""When the agent records the allocator's history: sampled training steps.

PyTorch's history recording costs every allocation a Python stack walk: 4-12%
of a GPT-2 step on an H200 (docs/gpu-e2e.md). The agent must not slow the
training job, so by default it records the first `warmup` optimizer steps
(where a configuration's out-of-memory error happens, and where the optimizer
state is made), then `window` steps out of every `every`, and nothing in
between. A recorded step costs +13-15% on GPT-2 124M (H200, docs/oom-naming.md),
so the share of recorded steps bounds the mean cost: 2 of every 100 is ~0.3%.
(2 of every 25 was ~1%: the default moved to 100 once the OOM tensor walk named
what the windows used to, docs/oom-naming.md.) Steps are counted by torch.optim's global step post-hook; a program
that never steps an optimizer is recorded all along, as before.

A window starts with an empty history (clear_history), so each recorded
window is consistent with the allocator's state while it is open: a snapshot
is taken only while recording is on. A snapshot asked for between windows
opens the next window at once (at the next step boundary) and is taken once
that window has recorded `window` whole steps; the window stays open until
the snapshot is taken. If the program makes no optimizer step for a while
(paused, evaluating), the snapshot is the allocator's state without a history. An out-of-memory error between windows is captured
without a trace (the allocator's segments, plus the failing request and the
Python stack that made it).

VRAMSCOPE_SAMPLE: "off" records every step; else "every=N,window=K,warmup=W"
(any subset; defaults 100, 2, 3).
"""
import os
import threading
import time

from . import _torch
from ._common import log

DEFAULTS = {"every": 100, "window": 2, "warmup": 3}
STALLED = "stalled"  # wait_recorded: no step came; take the allocator's state only


def stall_seconds():
    """How long a snapshot waits for the program's next step before it takes the
    allocator's state alone (VRAMSCOPE_STALL_S, default 5)."""
    try:
        return max(0.0, float(os.environ.get("VRAMSCOPE_STALL_S", "5")))
    except ValueError:
        return 5.0


def parse(spec):
    """None (record every step) or a dict with every/window/warmup."""
    if spec is None:
        spec = os.environ.get("VRAMSCOPE_SAMPLE", "")
    if isinstance(spec, dict):
        out = dict(DEFAULTS, **spec)
    else:
        s = str(spec).strip().lower()
        if s in ("off", "0", "no", "false", "none", "continuous"):
            return None
        out = dict(DEFAULTS)
        for part in filter(None, (p.strip() for p in s.split(","))):
            k, _, v = part.partition("=")
            if k not in DEFAULTS:
                raise ValueError("VRAMSCOPE_SAMPLE: unknown key %r (every, window, warmup)" % k)
            out[k] = int(v)
    if out["every"] <= 0 or out["window"] <= 0 or out["warmup"] < 0 or out["window"] >= out["every"]:
        raise ValueError("sampling wants every > window > 0 and warmup >= 0, not %r" % (out,))
    return out


class Schedule:
    """Turns the recording on and off at optimizer-step boundaries. on_step runs
    on the training thread (inside optimizer.step's post-hook); wait_recorded runs
    on the agent's worker thread."""

    def __init__(self, torch, start, stop, sample):
        self.torch = torch
        self._start = start  # start(clear) -> starts recording (clear: empty history)
        self._stop = stop
        self.sample = sample
        self.cond = threading.Condition()
        self.on = False
        self.step = 0
        self.left = 0  # steps still to record in this window
        self.since_start = 0  # whole steps recorded since the window opened
        self.want = 0  # snapshots waiting for a window
        self.hold = 0  # snapshots being taken: keep the window open
        self.windows = 0
        self.recorded_steps = 0
        self.hook = None
        self.last_start = 0
        # Seconds spent inside on_step (on the training thread), recording
        # switches included: the agent's own measure of what it costs a step.
        self.hook_s = 0.0

    def begin(self):
        """Start recording (the warm-up window) and hook optimizer steps."""
        self._start(False)
        with self.cond:
            self.on = True
            self.left = self.sample["warmup"] if self.sample else 0
            self.since_start = 0
            self.windows = 1
        if self.sample:
            self.hook = _torch.register_step_hook(self.torch, self.on_step)
            if self.hook is None:
                log.info("vramscope: no optimizer step hook in this torch: recording every step")

    def end(self):
        h, self.hook = self.hook, None
        if h is not None:
            try:
                h.remove()
            except Exception:
                pass
        with self.cond:
            self.on = False
            self.cond.notify_all()

    def state(self):
        with self.cond:
            return {"sampled": bool(self.sample and self.hook is not None), "recording_now": self.on,
                    "steps": self.step, "windows": self.windows, "recorded_steps": self.recorded_steps}

    def on_step(self, *_args, **_kw):
        """After every optimizer step: close a finished window, or open one when
        due or asked for. Must not raise (torch would raise into the program)."""
        t0 = time.perf_counter()
        try:
            with self.cond:
                self.step += 1
                if self.on:
                    self.recorded_steps += 1
                    self.since_start += 1
                    self.left -= 1
                    if self.left <= 0 and not self.hold and not self.want:
                        self._stop()
                        self.on = False
                        self.last_start = self.step
                else:
                    due = self.step - self.last_start >= self.sample["every"] - self.sample["window"]
                    if due or self.want:
                        self._start(True)
                        self.on, self.left, self.since_start = True, self.sample["window"], 0
                        self.windows += 1
                self.cond.notify_all()
        except Exception:
            log.warning("vramscope: step hook failed", exc_info=True)
        finally:
            self.hook_s += time.perf_counter() - t0

    def wait_recorded(self, timeout):
        """For a snapshot: block (the worker thread) until recording is on — at
        once when it is (the history is consistent with the allocator whenever
        recording is on), else until the window opened for it has recorded its
        steps — and keep it on until release(). Returns None; STALLED when the
        program made no step for stall_seconds() (take the allocator's state
        alone); or why no snapshot can be taken. release() only after None."""
        now = time.monotonic()
        deadline, stall = now + timeout, now + stall_seconds()
        with self.cond:
            if self.hook is None or self.on:
                self.hold += 1
                return None
            self.want += 1
            first = self.step
            try:
                while not (self.on and (self.since_start >= self.sample["window"] or self.left <= 0)):
                    now = time.monotonic()
                    if self.step == first and now >= stall:
                        return STALLED
                    if now >= deadline or self.hook is None:
                        return ("no recorded training step within %.0f s: the agent records %d of every %d optimizer "
                                "steps (VRAMSCOPE_SAMPLE=off records every step)" % (timeout, self.sample["window"],
                                                                                    self.sample["every"]))
                    self.cond.wait((min(stall, deadline) if self.step == first else deadline) - now)
                self.hold += 1
                return None
            finally:
                self.want -= 1

    def release(self):
        with self.cond:
            self.hold = max(0, self.hold - 1)

    def recording(self):
        with self.cond:
            return self.on
