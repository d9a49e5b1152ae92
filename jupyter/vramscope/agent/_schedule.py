"""When the agent records the allocator's history: sampled steps, or sampled time.

PyTorch's history recording costs every allocation a Python stack walk: 4-12%
of a GPT-2 step on an H200 (docs/gpu-e2e.md). The agent must not slow the
training job, so by default it records the first `warmup` optimizer steps
(where a configuration's out-of-memory error happens, and where the optimizer
state is made), then `window` steps out of every `every`, and nothing in
between. A recorded step costs +13-15% on GPT-2 124M (H200, docs/oom-naming.md),
so the share of recorded steps bounds the mean cost: 2 of every 100 is ~0.3%.
(2 of every 25 was ~1%: the default moved to 100 once the OOM tensor walk named
what the windows used to, docs/oom-naming.md.) Steps are counted by torch.optim's
global step post-hook.

A program that makes no optimizer step (generation, evaluation, a server
answering requests) has no step boundary, and recording it all along cost
generation +26% (docs/inference.md). There a clock thread samples wall-clock
time instead: the warm-up ends once the allocator has served `warmup_allocs`
allocations without a step, then a window of `window_s` seconds opens every
`period_s` (1% of the time by default), which bounds the mean cost the same
way. The clock acts only while no step came for `period_s`: a training
program stays on its steps (and its evaluation phases get clock windows). No
per-module or per-call hook is needed, so nothing is added to the program's
own calls; the clock starts and stops recording from its own thread while it
holds the GIL, as a snapshot already is taken from the worker thread (torch
gathers an allocation's stack before it takes the allocator's lock:
c10/cuda/CUDACachingAllocator.cpp, malloc, so no lock order is inverted).
warmup_allocs leaves a training program's first step recorded: the recorded
runs made 670-1457 allocations before their first optimizer step (gpt2_train,
llama_lora_gc, agent_gpt2).

A window starts with an empty history (clear_history), so each recorded
window is consistent with the allocator's state while it is open: a snapshot
is taken only while recording is on. A snapshot asked for between windows
opens the next window at once (at the next step boundary, or, in a program
without steps, by the clock, which the request wakes) and is taken once that window has
recorded `window` whole steps or `window_s` seconds; the window stays open
until the snapshot is taken. If a training program made no step for a while
(paused) but less than `period_s`, the snapshot is the allocator's state
without a history. An out-of-memory error between windows is captured without
a trace (the allocator's segments, plus the failing request and the Python
stack that made it).

VRAMSCOPE_SAMPLE: "off" records all along; else any subset of
"every=N,window=K,warmup=W,period_s=S,window_s=T,warmup_allocs=A"
(defaults 100, 2, 3, 30, 0.3, 20000); warmup=0 and warmup_allocs=0 together: no warm-up window.
"""
import os
import threading
import time

from . import _torch
from ._common import log

DEFAULTS = {"every": 100, "window": 2, "warmup": 3, "period_s": 30.0, "window_s": 0.3, "warmup_allocs": 20000}
FLOATS = ("period_s", "window_s")
STALLED = "stalled"  # wait_recorded: no step came; take the allocator's state only
# The clock thread's first wait, and its wait after an error reading its state.
TICK_S = 0.05
# The longest it sleeps when nothing is due (next_wait); snapshots wake it.
IDLE_S = 5.0
# During the warm-up the clock asks the allocator how many allocations it
# served (torch.cuda.memory_stats, ~0.1 ms) this often.
COUNT_S = 0.25


def stall_seconds():
    """How long a snapshot waits for the program's next step before it takes the
    allocator's state alone (VRAMSCOPE_STALL_S, default 5)."""
    try:
        return max(0.0, float(os.environ.get("VRAMSCOPE_STALL_S", "5")))
    except ValueError:
        return 5.0


def parse(spec):
    """None (record all along) or a dict with every/window/warmup (steps),
    period_s/window_s (seconds) and warmup_allocs."""
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
                raise ValueError("VRAMSCOPE_SAMPLE: unknown key %r (%s)" % (k, ", ".join(DEFAULTS)))
            out[k] = float(v) if k in FLOATS else int(v)
    if out["every"] <= 0 or out["window"] <= 0 or out["warmup"] < 0 or out["window"] >= out["every"]:
        raise ValueError("sampling wants every > window > 0 and warmup >= 0, not %r" % (out,))
    if not 0 < out["window_s"] < out["period_s"] or out["warmup_allocs"] < 0:
        raise ValueError("sampling wants period_s > window_s > 0 and warmup_allocs >= 0, not %r" % (out,))
    return out


class Schedule:
    """Turns the recording on and off at optimizer-step boundaries, or by the
    clock where no step comes. on_step runs on the training thread (inside
    optimizer.step's post-hook); wait_recorded on the agent's worker thread;
    tick on the clock thread."""

    def __init__(self, torch, start, stop, sample, allocations=None):
        self.torch = torch
        self._start = start  # start(clear) -> starts recording (clear: empty history)
        self._stop = stop
        self._allocations = allocations  # () -> allocations the allocator served, or None
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
        # The clock's state: the open window is the clock's (no step came in it),
        # when it opened, whether it has recorded enough for a snapshot, when the
        # last window closed and the last step came (monotonic seconds).
        self.by_clock = False
        self.warming = False
        self.opened_t = 0.0
        self.clock_done = False
        self.closed_t = 0.0
        self.last_step_t = None
        self.counted_t = 0.0
        self.clock_windows = 0
        self.clock = None
        self.quit = threading.Event()
        self.wake = threading.Event()  # the clock: look now (a snapshot waits, one was released, the end)
        # Seconds spent inside on_step (on the training thread), recording
        # switches included: the agent's own measure of what it costs a step.
        self.hook_s = 0.0
        # Seconds recorded (windows open) and since begin(): the default
        # mode's duty, which with what recording costs bounds its cost.
        self.recorded_s = 0.0
        self.began_t = None

    def begin(self):
        """Start recording (the warm-up window), hook optimizer steps and start the clock.
        With warmup=0 and warmup_allocs=0 there is no warm-up window: the first
        window is the steps' or the clock's."""
        self.began_t = time.monotonic()
        if self.sample and self.sample["warmup"] == 0 and self.sample["warmup_allocs"] == 0:
            with self.cond:
                self.on = False
                self.closed_t = time.monotonic()
        else:
            self._start(False)
            with self.cond:
                self.on = True
                self.left = self.sample["warmup"] if self.sample else 0
                self.since_start = 0
                self.windows = 1
                self.by_clock = self.warming = bool(self.sample)
                self.opened_t = time.monotonic()
        if self.sample:
            self.hook = _torch.register_step_hook(self.torch, self.on_step)
            if self.hook is None:
                log.info("vramscope: no optimizer step hook in this torch: recording every step")
                return
            self.clock = threading.Thread(target=self._run_clock, name="vramscope-clock", daemon=True)
            self.clock.start()

    def end(self):
        h, self.hook = self.hook, None
        self.quit.set()
        self.wake.set()
        if h is not None:
            try:
                h.remove()
            except Exception:
                pass
        with self.cond:
            self.recorded_s = self._recorded(time.monotonic())
            self.on = False
            self.cond.notify_all()
        c = self.clock
        if c is not None and c is not threading.current_thread():
            c.join(1.0)

    def _recorded(self, now):
        """Seconds recorded up to now, the open window's included (under self.cond)."""
        return self.recorded_s + (now - self.opened_t if self.on else 0.0)

    def state(self):
        with self.cond:
            now = time.monotonic()
            rec = self._recorded(now)
            return {"sampled": bool(self.sample and self.hook is not None), "recording_now": self.on,
                    "steps": self.step, "windows": self.windows, "recorded_steps": self.recorded_steps,
                    "clock_windows": self.clock_windows, "recorded_s": round(rec, 6),
                    "since_s": round(now - self.began_t, 6) if self.began_t is not None else 0.0}

    def on_step(self, *_args, **_kw):
        """After every optimizer step: close a finished window, or open one when
        due or asked for. Must not raise (torch would raise into the program)."""
        t0 = time.perf_counter()
        try:
            with self.cond:
                self.step += 1
                self.last_step_t = time.monotonic()
                if self.on:
                    self.by_clock = self.warming = False  # steps are in charge of this window now
                    self.recorded_steps += 1
                    self.since_start += 1
                    self.left -= 1
                    if self.left <= 0 and not self.hold and not self.want:
                        self._close()
                else:
                    due = self.step - self.last_start >= self.sample["every"] - self.sample["window"]
                    first = self.step == 1 and self.sample["warmup"] > 0  # after a clock warm-up: the steps' own
                    if due or self.want or first:
                        self._open(self.sample["warmup"] if first else self.sample["window"])
                self.cond.notify_all()
        except Exception:
            log.warning("vramscope: step hook failed", exc_info=True)
        finally:
            self.hook_s += time.perf_counter() - t0

    def _open(self, steps, by_clock=False):
        """Start a window with an empty history (under self.cond)."""
        self._start(True)
        self.on, self.left, self.since_start = True, steps, 0
        self.by_clock, self.warming, self.clock_done = by_clock, False, False
        self.opened_t = time.monotonic()
        self.windows += 1
        self.clock_windows += by_clock

    def _close(self):
        self._stop()
        self.closed_t = time.monotonic()
        self.recorded_s = self._recorded(self.closed_t)
        self.on = self.by_clock = self.warming = False
        self.last_start = self.step

    # --- the clock: windows in wall-clock time where no step comes --------------

    def _run_clock(self):
        wait = TICK_S
        while not self.quit.is_set():
            self.wake.wait(wait)
            self.wake.clear()  # a wake after this is seen by the next wait; before it, by this tick
            if self.quit.is_set():
                return
            try:
                self.tick(time.monotonic())
                wait = self.next_wait(time.monotonic())
            except Exception:
                log.warning("vramscope: sampling clock failed; it stops", exc_info=True)
                return

    def next_wait(self, now):
        """How long the clock sleeps: until the next thing it has to do — the
        open clock window's end (so a window records window_s, not window_s
        rounded up to a 50 ms tick: a 15 ms window lasted 50 ms on the H200,
        three times the duty), the warm-up's next count, the next window due —
        at most IDLE_S; a snapshot asked for (wait_recorded) or released wakes
        it at once. Waking 20 times a second cost the clock thread 0.2% of a
        core on the H200 (examples/inference/threads.py). Read without the lock:
        a stale value costs one early wake."""
        try:
            if self.on:
                if not self.by_clock:
                    return IDLE_S  # the steps' window: the steps close it
                if self.warming:
                    left = self.counted_t + COUNT_S - now
                else:
                    left = self.opened_t + self.sample["window_s"] - now
            else:
                left = self.closed_t + self.sample["period_s"] - self.sample["window_s"] - now
                if self.last_step_t is not None:  # the clock acts once no step came for period_s
                    left = max(left, self.last_step_t + self.sample["period_s"] - now)
        except Exception:
            return TICK_S
        # Past due and not done (a window held for a snapshot, a clock that may
        # not open one): until woken, never a spin.
        return IDLE_S if left <= 0 else min(IDLE_S, left)

    def idle(self, now):
        """No optimizer step for period_s (or none ever): the clock's turn."""
        return self.last_step_t is None or now - self.last_step_t >= self.sample["period_s"]

    def tick(self, now):
        """Open a window when one is due or a snapshot waits, close one that has
        recorded window_s (the warm-up: warmup_allocs allocations)."""
        count = None
        if self.warming and now - self.counted_t >= COUNT_S:
            self.counted_t = now
            count = self._allocations() if self._allocations is not None else None
        with self.cond:
            if self.hook is None:
                return
            if not self.on:
                due = now - self.closed_t >= self.sample["period_s"] - self.sample["window_s"]
                if self.idle(now) and (due or self.want):
                    self._open(self.sample["window"], by_clock=True)
                    self.cond.notify_all()
                return
            if not self.by_clock:
                return
            if self.warming:
                if count is None and self._allocations is not None:
                    return  # not counted at this tick
                if count is None or count < 0:  # no count from this torch: ten windows' time
                    done = now - self.opened_t >= 10 * self.sample["window_s"]
                else:  # counted from the process's start: the agent starts with CUDA, as a rule
                    done = count >= self.sample["warmup_allocs"]
            else:
                done = now - self.opened_t >= self.sample["window_s"]
            if done:
                self.clock_done = True
                if not self.hold and not self.want:
                    self._close()
                self.cond.notify_all()

    def wait_recorded(self, timeout):
        """For a snapshot: block (the worker thread) until recording is on — at
        once when it is (the history is consistent with the allocator whenever
        recording is on), else until the window opened for it has recorded its
        steps (or its seconds, by the clock) — and keep it on until release().
        Returns None; STALLED when a training program made no step for
        stall_seconds() (take the allocator's state alone); or why no snapshot
        can be taken. release() only after None."""
        now = time.monotonic()
        deadline, stall = now + timeout, now + stall_seconds()
        with self.cond:
            if self.hook is None or self.on:
                self.hold += 1
                return None
            self.want += 1
            self.wake.set()  # the clock opens its window now, not at its next wake
            first = self.step
            try:
                while not (self.on and (self.since_start >= self.sample["window"] or self.left <= 0 or
                                        self.clock_done)):
                    now = time.monotonic()
                    if self.step == first and now >= stall and not self.idle(now):
                        return STALLED
                    if now >= deadline or self.hook is None:
                        return ("no recorded window within %.0f s: the agent records %d of every %d optimizer "
                                "steps, or %.1f s of every %.0f s without steps (VRAMSCOPE_SAMPLE=off records "
                                "all along)" % (timeout, self.sample["window"], self.sample["every"],
                                                self.sample["window_s"], self.sample["period_s"]))
                    self.cond.wait(max(0.001, min(stall if now < stall else deadline, deadline) - now))
                self.hold += 1
                return None
            finally:
                self.want -= 1

    def release(self):
        with self.cond:
            self.hold = max(0, self.hold - 1)
        self.wake.set()  # a clock window held past its end closes now

    def recording(self):
        with self.cond:
            return self.on
