"""Every step's memory for the whole run: the road to an out-of-memory error.

At each step's end the agent keeps allocated and reserved bytes, the step's
peak, its duration, its wall time and the shapes of the tensors passed to the
root module (batch x sequence), in a ring of RING steps. The daemon gets the
new steps every LEVELS_EVERY seconds (agent.levels) and those not sent yet
with every snapshot (agent.dump's answer, agent.captured), and keeps them
beside the snapshot: its report draws the road, its finding says what changed
at the step that failed (docs/road-to-oom.md).

What a step is:
- "train": ended by an optimizer step (torch.optim's global post-hook; the
  steps of an optimizer in backward end one step, with the backward:
  _torch.register_step_hook);
- "eval": a call of a root module without gradients (no_grad, inference_mode)
  in a program that makes optimizer steps: evaluation between steps;
- "forward": a call of a root module in a program that has made no optimizer
  step (generation, evaluation, serving): without gradients at once, with
  gradients after PROBE_CALLS root calls and still no optimizer step;
- a `generate` call of a root module (Hugging Face's GenerationMixin, or any
  model class with a `generate` method) is one step of the phase its root
  calls would have had, not one step per token (inside a training step a
  root call began, none: the training step goes on); while it runs the roots'
  hooks are taken away (Roots.take), so its tokens pay nothing (a token's
  root call with the hooks on cost +0.5% of a GPT-2 medium token on the
  H200, docs/inference.md).
A root module is one called while no other module runs: found with torch's
global module hooks until the first optimizer step, or SETTLE_CALLS root
calls in a row that found no new root (PROBE_CALLS at most), then only the
roots keep a hook (a global hook slows every module's call). After the
first optimizer step only the first root call of a step is looked at (a
step's other calls are gradient accumulation or a loss module).

Cost: on the training thread, as little as can be; none on the device. A
step that is not read is, in training, one pre-hook on the root (the inputs'
shapes, whether gradients are on) and the optimizer's post-hook (one clock()
and one append of a raw entry to a deque); the roots' post-hooks are there
only while evaluation or forward steps come (QUIET_STEPS). The agent's
threads make the entries what is sent (duration, wall time, shapes as lists)
and keep them (drain). The levels are the caching allocator's host-side
counters (torch._C._cuda_memoryStats, one call for the three; it never
synchronises the GPU) and the peak is reset with
torch._C._cuda_resetPeakMemoryStats. The agent times all it does on the
training thread (cost_s; read_s the reads) and reads the allocator less often
when that passes BUDGET (0.1%) of a step; where the hooks alone pass it
(sparse), the roots have no pre-hook between reads and a step there is the
optimizer's post-hook's fast path (Levels.step_hook: a clock appended to a
list), and an out-of-memory error between reads takes its inputs from the
stack (_rootcall). docs/road-to-oom.md has the measured cost. A failing
read drops the step's levels (-1), never raises.
Because the peak is reset at every read, torch.cuda.max_memory_allocated and
max_memory_reserved are wrapped to return the peak since the program's own
last reset_peak_memory_stats, as they would without the agent
(memory_stats()'s "peak" fields are per step; VRAMSCOPE_LEVELS=0 turns all of
this off).
"""
import collections
import functools
import inspect
import itertools
import sys
import threading
import time

from . import _rootcall
from ._common import _env_off, log

RING = 100_000  # steps kept, oldest dropped
SEND_MAX = 3000  # steps in one agent.levels message (daemon/api MaxLevelsSent)
LEVELS_EVERY = 2.0  # seconds between agent.levels notifications
PROBE_CALLS = 64  # root calls without an optimizer step before discovery ends, at most
# ... or fewer: SETTLE_CALLS root calls in a row that found no new root end it. The global
# hooks put two Python calls and torch's slow call path on every module call: a request loop
# (GPT-2 medium, 16 new tokens a request) ran its calls 60% slower while they were on (H200,
# 2026-12-03), for its first ~4 requests with PROBE_CALLS alone.
SETTLE_CALLS = 8
MAX_INPUTS = 4  # tensor shapes kept per step
MAX_DIMS = 6
# What the bookkeeping may cost the training thread, as a share of a step:
# past it the allocator is read every few steps (at most every MAX_STRIDE, below),
# the steps between keep their duration and inputs with levels of -1, and a
# read's peak covers the steps since the one before (docs/road-to-oom.md).
BUDGET = 0.001
# The strides aim at AIM of it: they are set from the last window's costs, and
# on the H200 a run aimed at the whole budget spent 0.100-0.118% of its short
# steps (docs/road-to-oom.md, run 5).
AIM = 0.8
MAX_STRIDE = 64
# ... or more where MAX_STRIDE steps take less than READ_GAP_S: the strides may
# then reach a read every READ_GAP_S (on 8 ms steps a read step's ~130 µs over
# 64 steps was 2 µs of the 7 µs a step came to, H200 2026-12-04)
READ_GAP_S = 1.0
BUDGET_STEPS = 64  # steps between two settings of the strides, once past the first
KEEP_RAW = 256  # raw entries left in the training thread's ring (_budget reads the last ones)
SETTLE_MAX = 8192  # raw entries moved at one drain
QUIET_STEPS = 16  # training steps without evaluation after which the roots lose their post-hooks
# What a step between reads costs in sparse mode (step_hook's fast path), torch's
# dispatch of the hook included, for the budget: untimed, as timing it would cost
# about as much (H200, 2026-12-04, road_dispatch.py: 2.5-2.9 µs median, 3.3-4.1 mean
# with the steps that swap the pre-hooks; docs/road-to-oom.md, runs 11-13)
FAST_STEP_S = 3e-6
# What the hooks cost the training thread over what they time of themselves: torch's
# dispatch of them and the cold caches a GPU step leaves. On the H200 (road_dispatch.py,
# docs/road-to-oom.md, run 13) GPT-2 124M's steps between reads with every step's inputs
# cost 26 µs (median; mean 36) where the hooks timed 7.7 µs: 3.4-4.7x; a read step 1.1-1.9x.
# The budget sets the strides from the timed costs times this.
UNTIMED = 4.0
SITE_READS = 16  # sparse read steps between two looks for where the roots are called (Levels.site)


def _not_compiling():
    return False


# torch.compiler.is_compiling once start() has found it: a hook that torch.compile
# traces returns at once (dynamo folds the call to a constant), so the agent's
# Python (threading.get_ident, perf_counter) never breaks the user's graph.
_compiling = _not_compiling


def _shapes(args, kwargs):
    """Shapes of the first MAX_INPUTS tensors among args and kwargs' values
    (a dict or list argument is looked into one level deep), as the tensors'
    own shape objects (torch.Size: a tuple of ints that holds no tensor);
    as_wire makes them lists. A tensor is a value with a shape and a dtype;
    what a value's type is (_kinds) is found once per type."""
    out = []
    kinds = _kinds
    for vs in (args, kwargs.values()) if kwargs else (args,):
        for v in vs:
            k = kinds.get(type(v)) or _kind(v)
            if k == _TENSOR:
                s = getattr(v, "shape", None)
                if s is not None and len(s) <= MAX_DIMS:
                    out.append(s)
            elif k == _SEQ:
                _inner(out, v[:MAX_INPUTS])
            elif k == _MAP:
                _inner(out, list(v.values())[:8])
            else:
                continue
            if len(out) >= MAX_INPUTS:
                return tuple(out[:MAX_INPUTS])
    return tuple(out) or None


_TENSOR, _SEQ, _MAP, _OTHER, _ASK = 1, 2, 3, 4, 5
_kinds = {}  # type -> what a value of it is to _shapes


def _kind(v):
    """A value's kind; kept for its type, but for an object with attributes
    of its own that is no tensor, list or dict (asked again each time)."""
    if getattr(v, "shape", None) is not None and hasattr(v, "dtype"):
        k = _TENSOR
    elif isinstance(v, (list, tuple)):
        k = _SEQ
    elif isinstance(v, dict):
        k = _MAP
    elif hasattr(v, "__dict__"):
        return _ASK
    else:
        k = _OTHER
    if len(_kinds) < 256:
        _kinds[type(v)] = k
    return k


def _inner(out, vs):
    for x in vs:
        if len(out) < MAX_INPUTS and hasattr(x, "dtype"):
            s = getattr(x, "shape", None)
            if s is not None and len(s) <= MAX_DIMS:
                out.append(s)


class Reader:
    """The caching allocator's counters of one device: read() is
    (allocated, reserved, peak allocated, peak reserved) since the last
    reset, then resets the peaks. Host-side only."""

    def __init__(self, torch, index):
        c = getattr(torch, "_C", None)
        self._stats = getattr(c, "_cuda_memoryStats", None)
        self._reset = getattr(c, "_cuda_resetPeakMemoryStats", None)
        self.index = index
        self.cuda = torch.cuda
        if self._stats is None or self._reset is None:
            self.read = self._read_public

    def read(self):
        s = self._stats(self.index)
        ab, rb = s["allocated_bytes"]["all"], s["reserved_bytes"]["all"]
        out = (ab["current"], rb["current"], ab["peak"], rb["peak"])
        self._reset(self.index)
        return out

    def _read_public(self):
        """A torch without the private calls: memory_stats (slower, ~0.1 ms)."""
        c, i = self.cuda, self.index
        s = c.memory_stats(i)
        out = (s.get("allocated_bytes.all.current", 0), s.get("reserved_bytes.all.current", 0),
               s.get("allocated_bytes.all.peak", 0), s.get("reserved_bytes.all.peak", 0))
        getattr(c.memory, "_orig_reset_peak", c.reset_peak_memory_stats)(i)
        return out


PHASES = ("train", "eval", "forward")


class _Cell:
    """A recording() function where Levels wants a cell (rec[0])."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, _i):
        return self.fn()


class SafePoint:
    """fn, asked for by one thread and run once by the training thread at a
    step's end (Levels.at_step_end); the asker may withdraw it until then."""

    def __init__(self, fn, ready):
        self.fn = fn
        self.ready = ready
        self.lock = threading.Lock()
        self.state = 0  # 0 waiting, 1 taken, 2 withdrawn
        self.done = threading.Event()
        self.result = None

    def take(self):
        """On the training thread: run fn unless withdrawn or not ready;
        whether it is done with (ran, or was withdrawn)."""
        if self.state == 0 and not self.ready():
            return False
        with self.lock:
            if self.state:
                return True
            self.state = 1
        try:
            self.result = self.fn()
        except Exception:
            log.debug("vramscope: the work asked for at a step's end failed", exc_info=True)
        finally:
            self.done.set()
        return True

    def withdraw(self):
        """On the asker's thread: True when fn will not run."""
        with self.lock:
            if self.state == 0:
                self.state = 2
            return self.state == 2


class Levels:
    """The steps and the hooks that record them.

    The training thread (the hooks, on_oom) does the least it can: a step
    that is not read is one append to `ring` of a raw entry (step, t,
    inputs, phase, recorded), t the clock at the step's end and inputs the
    tensors' own shape objects; a read step's entry adds (oom, allocated,
    reserved, peak). On a read step, every BUDGET_STEPS steps or so, _budget
    sets the strides from what the hooks and the reads cost (cost_s, read_s)
    against the durations of the last steps in `ring`.

    The agent's threads (drain, resend, dropped, under `lock`) move the raw
    entries but the last KEEP_RAW from `ring` to `kept` as they are sent
    (duration from the step before, wall time, shapes as tuples of ints):
    the training thread only appends and never frees an old entry, and
    `sent` is the first step not handed over yet. A deque's append and
    popleft, and a C-level copy of it, are atomic under the GIL. rec is a
    cell: rec[0] is whether a recording window is open."""

    def __init__(self, reader=None, recording=(False,), grad_enabled=lambda: True, clock=time.perf_counter,
                 wall=time.time):
        # what the hooks touch at every step first, together
        self.clock = clock
        self.in_root = 0
        self.inputs = None  # shapes of the current step's first root call
        self.trained = False  # an optimizer step came
        self.grad_enabled = grad_enabled
        self.closing = None  # the phase the root call under way ends ("eval", "forward"), or None
        self.cost_s = 0.0  # seconds on the training thread, all of it
        self.left_train = 1  # training steps to the next read
        self.step = 0  # steps kept: the next step's number
        self.ring = collections.deque(maxlen=RING)  # raw entries, oldest dropped
        self.rec = _Cell(recording) if callable(recording) else recording  # rec[0]: recording now
        self.ttype = None  # the type of the tensors passed to the roots, once seen
        self.left = {"eval": 1, "forward": 1}  # steps of the other phases to their next read
        self.t_first = None  # clock() at the first root call: the first step's start
        self.wall = wall
        self.reader = reader  # a Reader, or None until the device is known (find_reader)
        self.find_reader = None  # () -> None: sets reader; tried once, at the first read
        self.on_first_step = None  # () -> None, at the first optimizer step (Roots.finish)
        self.posts = None  # (on) -> None: puts or takes away the roots' post-hooks; None: they stay
        self.posted = True  # the roots have their post-hooks
        self.quiet = 0  # training steps with post-hooks and no evaluation call
        self.grad_calls = 0  # root calls with gradients before any optimizer step
        self.failed = 0  # reads that failed
        self.reads = 0  # reads made (failed ones too)
        self.read_s = 0.0  # the part of cost_s spent reading the allocator
        self.tally = [0, 0]  # peak allocated and reserved since the program's own last reset
        self.total = 0  # the device's memory, once known
        self.fraction = None  # () -> the memory fraction, or None
        # the budget: read a phase's step when its countdown `left` runs out, then `left` = its stride
        self.strides = dict.fromkeys(PHASES, 1)
        self.stride = 1  # the stride of the phase of the step that set them last
        self.budget_next = 2  # the step at or after which _budget runs next
        self.mark = (0, 0.0, 0.0, 0, 0.0, 0, 0)  # (step, cost_s, read_s, reads, pre_s, pre_n, fast_n) when it last ran
        self.base = self.extra = None  # seconds a step: the hooks without a read; a read's own
        self.pre = None  # seconds a step's root pre-hooks take (root_pre), moving
        self.other = None  # seconds a step: the hooks but the roots' pre-hooks and reads, last measured
        self.pre_s = 0.0  # the part of cost_s spent in root_pre
        self.pre_n = 0  # steps whose inputs root_pre took
        # sparse: the hooks alone pass BUDGET (short training steps): the roots' pre-hooks
        # run on read steps only, and between them a step is step_hook's fast path; an
        # out-of-memory error there finds its inputs on the stack (rootcall, _rootcall).
        # set_pre(full) puts or takes away the pre-hooks (Roots.set_pre).
        self.sparse = False
        self.pre_full = True  # the roots have root_pre as their pre-hook
        self.set_pre = None
        self.rootcall = None  # () -> (args, kwargs) of the failing step's root call from the stack, or None
        self.find_site = None  # () -> (code, line) that called the root (from root_pre), or None
        # the fast hook (step_hook): clock() at the end of the steps it took since _slow ran
        self.times = []
        self.flock = threading.Lock()  # _flush's, and drain's look at step and times
        self.hook = None  # the function torch calls at each optimizer step, once made
        self.due = 0  # steps in times before _slow (its default); armed past 1
        self.was = False  # rec[0] when it was armed: its steps' recorded
        self.fast_n = 0  # steps it took (untimed: FAST_STEP_S each for the budget)
        self.backward_depth = (0,)
        self.defer = None
        self.tid = None  # the thread of the last read step (the training thread): on_oom's stack
        self.site = None  # (code, line) that called the roots at a read step, sparse
        self.site_read = 0  # ... looked for again at this many reads
        # the agent's threads (under lock)
        self.lock = threading.Lock()
        self.kept = collections.deque(maxlen=RING)  # entries moved from ring, as sent
        self.last_raw = None  # the raw entry moved last
        self.sent = 0  # the first step not handed over yet
        self.lost = 0  # steps that went before they were handed over
        self.lost_upto = 0  # the step after the last one counted in lost
        self.wanted = None  # a SafePoint another thread asked for (at_step_end)

    # --- the training thread ---------------------------------------------------

    def close(self, phase, oom=False):
        """The current step ended (or ran out of memory): keep it."""
        self._close(self.clock(), phase, oom)

    def _close(self, t, phase, oom, c=None):
        """Keep the step that ended at t; cost_s counts from c, else t. A
        training step comes here to be read (_step counts them down); the
        steps the hook took before another phase's step are kept first."""
        try:
            if self.times:
                self.disarm()
                self._flush(len(self.times))
            n = self.step
            self.step = n + 1
            ins, self.inputs = self.inputs, None
            left = self.left
            if phase != "train" and not oom and left[phase] > 1:
                left[phase] -= 1
                self.ring.append((n, t, ins, phase, self.rec[0]))
            else:
                self._read(n, t, ins, phase, oom)
        except Exception:
            log.debug("vramscope: step levels failed", exc_info=True)
        self.cost_s += self.clock() - (t if c is None else c)

    def _read(self, n, t, ins, phase, oom):
        """A step whose levels are read: the allocator's counters, and the
        budget when due; the phase's next read comes after its stride, or at
        the budget's next step if sooner."""
        rd = self.reader
        if rd is None and self.find_reader is not None:
            find, self.find_reader = self.find_reader, None
            try:
                find()
            except Exception:
                log.debug("vramscope: no device for step levels", exc_info=True)
            rd = self.reader
        a = r = p = -1
        if rd is not None:
            r0 = self.clock()
            try:
                a, r, p, pr = rd.read()
                tl = self.tally
                if p > tl[0]:
                    tl[0] = p
                if pr > tl[1]:
                    tl[1] = pr
            except Exception:
                self.failed += 1
                a = r = p = -1
            self.reads += 1
            self.read_s += self.clock() - r0
        self.ring.append((n, t, ins, phase, bool(self.rec[0]), oom, a, r, p))
        if n >= self.budget_next:
            self._budget(n, phase)
        k = max(1, min(self.strides[phase], self.budget_next - n))
        if phase == "train":
            self.left_train = k
            if not oom:
                self.tid = threading.get_ident()
            if self.sparse or not self.pre_full:
                self._full_pre(k == 1 or not self.sparse or self.posted)
        else:
            self.left[phase] = k

    def _budget(self, n, phase):
        """Keep this bookkeeping within BUDGET of a step: a phase's steps are
        read every `stride`, set from what a step costs without a read (base,
        over the steps since the last time) and what a read adds (extra, its
        moving average), against the mean duration of the phase's steps
        among them (an evaluation pass's short steps leave the training
        steps' stride alone). Runs on a read step, at steps 2, 4, 8, ...
        then every BUDGET_STEPS."""
        m0, c0, r0, k0, p0, q0, f0 = self.mark
        m = n - m0
        if m <= 0:
            return
        self.mark = (n, self.cost_s, self.read_s, self.reads, self.pre_s, self.pre_n, self.fast_n)
        self.budget_next = n + min(n, BUDGET_STEPS)
        dr, dk, dp, dq = self.read_s - r0, self.reads - k0, self.pre_s - p0, self.pre_n - q0
        if dq:
            pre = dp / dq
            self.pre = pre if self.pre is None else (self.pre + pre) / 2
        # what the hooks cost, as timed (UNTIMED: with torch's dispatch and a step's cold
        # caches), the fast path's steps at FAST_STEP_S (untimed, so measured as they cost)
        spent = max(0.0, self.cost_s - c0 - dr) * UNTIMED + (self.fast_n - f0) * FAST_STEP_S
        base = spent / m  # the last steps': a start's costs go at once
        self.other = other = max(0.0, base - dp * UNTIMED / m)  # ... but the roots' pre-hooks'
        if self.sparse and self.pre is not None:  # the hooks all, each step, as if not sparse
            base = other + self.pre * UNTIMED
        self.base = base
        if dk:
            extra = dr / dk
            self.extra = extra if self.extra is None else (self.extra + extra) / 2
        if self.extra is None:
            return
        extra = self.extra * UNTIMED
        dur, cnt = {}, {}
        es = list(itertools.islice(reversed(self.ring), m + 1))  # steps n back to m0; atomic (drain pops meanwhile)
        newer = es[0]
        for older in es[1:]:
            ph = newer[3]
            dur[ph] = dur.get(ph, 0.0) + (newer[1] - older[1])
            cnt[ph] = cnt.get(ph, 0) + 1
            newer = older
        sparse = False
        for ph, d in dur.items():
            most = max(MAX_STRIDE, int(READ_GAP_S * cnt[ph] / d)) if d > 0 else MAX_STRIDE
            room = AIM * BUDGET * d / cnt[ph] - base
            s = most + 1 if room <= 0 else int(-(-extra // room))
            if s > most and ph == "train" and n >= BUDGET_STEPS and self.pre and self.set_pre is not None:
                # the pre-hooks too on read steps only: what the others cost, at most
                room = AIM * BUDGET * d / cnt[ph] - other
                s = most if room <= 0 else int(-(-(self.pre * UNTIMED + extra) // room))
                sparse = True
            s = max(1, min(most, s))
            self.strides[ph] = s
            if ph == "train":
                self.left_train = min(self.left_train, s)
            elif self.left[ph] > s:
                self.left[ph] = s
        if "train" in dur:
            self.sparse = sparse
            if n >= BUDGET_STEPS:  # past steps 2, 4, ... 64: the next setting (a read) not before the stride
                self.budget_next = n + max(self.budget_next - n, self.strides["train"])
        self.stride = self.strides[phase]

    def _full_pre(self, full):
        """Give the roots root_pre (full) or, sparse, no pre-hook; a failure
        leaves root_pre in place (Roots.set_pre) and the run not sparse from
        then on."""
        if full == self.pre_full or self.set_pre is None:
            return
        try:
            self.set_pre(full)
            self.pre_full = full
        except Exception:
            log.debug("vramscope: the roots' pre-hooks could not change", exc_info=True)
            self.set_pre = None
            self.sparse = False
            self.pre_full = True

    def on_optimizer_step(self, _opt=None, _args=None, _kwargs=None):
        """A training step ended, as torch.optim's global post-hook (must not
        raise) where step_hook's is not used (a caller's own loop)."""
        self.times.append(self.clock())
        self._slow()

    @property
    def armed(self):
        """The hook has steps to take before _slow."""
        return self.due > 1

    @property
    def steps_ended(self):
        """Training and other steps ended so far, those in `times` too."""
        return self.step + len(self.times)

    def step_hook(self):
        """The optimizer's post-hook that torch calls, registered as it is
        (_torch.register_step_hook, direct). In sparse mode, between reads, a
        step is this function alone: its clock appended to `times`, until
        `due` of them are there (the step before the next read) or recording
        starts or stops; _slow takes every other step (on_optimizer_step's
        work, after keeping the steps in `times`). Its state is its
        defaults (_arm): locals, the fewest objects a step touches (on the
        H200, torch's dispatch of an empty hook and ours cost more than
        ours did: docs/road-to-oom.md). An optimizer step inside backward()
        waits for the outermost backward's end."""
        from . import _torch

        def hook(_opt, _args, _kwargs, depth=(0,), defer=None, clock=None, append=None, len=len, times=(),
                 due=0, rec=(False,), was=False, slow=None):
            if depth[0]:
                return defer()
            append(clock())
            if len(times) < due and rec[0] is was:
                return None
            return slow()

        self.hook = hook
        self.backward_depth = _torch.backward_depth
        self.defer = functools.partial(_torch.defer, hook)
        self._arm(0)
        return hook

    def _arm(self, due):
        """The hook's state: due steps in `times` before _slow (0: every step)."""
        h = self.hook
        if h is None:
            return
        rec = self.rec
        was = rec[0]
        self.due = due
        if due > 1:  # else the steps in times keep theirs
            self.was = was
        ts = self.times
        h.__defaults__ = (self.backward_depth, self.defer, self.clock, ts.append, len, ts, due, rec, was, self._slow)

    def disarm(self):
        """Every step to _slow from the next (any thread: what it does must
        see each step)."""
        if self.due > 1:
            self._arm(0)

    def _slow(self):
        """A step the hook's fast path did not take, its clock the last in
        `times`: the steps before it there kept, then _close's work, written
        out for the step that is not read; the hook armed again when sparse
        mode has steps between reads to come. One frame (a cold call costs
        microseconds after a GPU step); torch's hook: it must not raise."""
        ts = self.times
        try:
            t = ts.pop()  # first: drain takes what is left for the fast path's steps
            if ts:
                with self.flock:
                    self._flush_locked(len(ts))
            if self.wanted is not None:
                self._run_wanted()
            c = self.clock()
            if self.posted:  # else there is no nesting to undo
                self.in_root = 0  # a forward that raised left no post-hook
                self.closing = None
                if not self.trained:
                    self._first_step()
                elif self.posts is not None:
                    self._quiet()
            k = self.left_train
            if k > 1:
                self.left_train = k - 1
                n = self.step
                self.step = n + 1
                self.ring.append((n, t, self.inputs, "train", self.rec[0]))
                self.inputs = None
                if self.sparse and not self.posted and (k == 2) != self.pre_full:  # root_pre for a read step
                    self._full_pre(k == 2)
                self.cost_s += self.clock() - c
            else:
                self._close(t, "train", False, c)
            k = self.left_train
            if k > 2 and self.sparse and not self.pre_full and not self.posted and self.trained:
                self._arm(k - 1)
                if self.wanted is not None:  # asked for since it was looked at (at_step_end: wanted, then disarm)
                    self._arm(0)
            elif self.due > 1:
                self._arm(0)
        except Exception:
            ts.clear()
            log.debug("vramscope: step levels failed", exc_info=True)

    def _flush(self, k):
        """The first k steps in `times`, taken by the hook between reads: kept
        as training steps without levels or inputs (under flock: drain
        numbers those it sends before they are kept from step)."""
        with self.flock:
            self._flush_locked(k)

    def _flush_locked(self, k):
        ts = self.times
        n, r, app = self.step, self.was, self.ring.append
        for i in range(k):
            app((n + i, ts[i], None, "train", r))
        self.step = n + k
        self.left_train -= k
        self.fast_n += k
        del ts[:k]

    def _run_wanted(self):
        """What another thread asked to run at a step's end (at_step_end)."""
        sp = self.wanted
        try:
            if sp is not None and sp.take():
                self.wanted = None
        except Exception:
            pass

    def at_step_end(self, fn, timeout, ready=lambda: True):
        """Run fn() on the training thread at the end of its next optimizer
        step, where neither forward nor backward runs (from another thread;
        ready() must hold then, else a later step's end is waited for).
        Returns (True, fn's result), or (False, None) when the program makes
        no optimizer steps or none ended within timeout seconds."""
        if not self.trained:
            return False, None
        sp = SafePoint(fn, ready)
        self.wanted = sp
        self.disarm()  # after wanted: _slow arms, then looks at wanted
        if not sp.done.wait(timeout) and sp.withdraw():
            if self.wanted is sp:
                self.wanted = None
            return False, None
        sp.done.wait()  # taken: it finishes
        return True, sp.result

    def next_step_in(self):
        """How long to wait for the next training step's end: three times the
        last step's duration, at least 1 s; 0 when the program is not making
        training steps now (the last step kept is not one, or none ended in
        twice a step and a second: a notebook between cells, a long
        evaluation)."""
        es = list(itertools.islice(reversed(self.ring), 2))  # atomic (drain pops meanwhile)
        ts = self.times[-2:]  # the hook's steps not kept yet: training steps, the newest
        ends = ts[::-1] + [e[1] for e in es if e[3] == "train"] if ts else None
        if ends is None:
            if not es or es[0][3] != "train":
                return 0.0
            ends = [es[0][1]] + ([es[1][1]] if len(es) == 2 and es[1][0] == es[0][0] - 1 else [])
        dur = ends[0] - ends[1] if len(ends) > 1 else 1.0
        if self.clock() - ends[0] > 2 * dur + 1.0:
            return 0.0
        return max(1.0, 3 * dur)

    def _first_step(self):
        self.trained = True
        first = self.on_first_step
        if first is not None:
            try:
                first()
            except Exception:
                log.debug("vramscope: root discovery did not end", exc_info=True)

    def _quiet(self):
        """A training step with the roots' post-hooks in place: after
        QUIET_STEPS of them without an evaluation call, take them away."""
        self.quiet += 1
        if self.quiet >= QUIET_STEPS:
            self.quiet = 0
            self.posts(False)
            self.posted = False

    def root_pre(self, _module, args, kwargs=None):
        """A root module's forward pre-hook: the step's inputs at its first
        root call, and whether the call ends a step.

        Before any optimizer step, every root call not inside another is
        looked at (_forward_call). After it, only the first root call of a
        step: without gradients it is an evaluation step, which the root's
        post-hook ends. Those hooks are there only while evaluation steps
        come (posted): in training the pre-hook does not count nesting and
        nothing runs at a forward's end."""
        if _compiling():  # traced by torch.compile: stay out of its graph
            return
        t = self.clock()
        took = False
        try:
            if self.due > 1:  # the hooks came back between reads (Roots._rehook): every step seen
                self.disarm()
            first = True
            if self.posted:
                n = self.in_root
                self.in_root = n + 1
                if n or not self.trained:
                    first = False
                    if not n:
                        self._forward_call(args, kwargs, t)
            if first and self.inputs is None:  # _shapes, written out for tensors and values of no interest
                ins = []
                tt = self.ttype
                u = s = None
                for v in (*args, *kwargs.values()) if kwargs else args:
                    if type(v) is tt:
                        if v is not u:  # labels=input_ids: one shape
                            u, s = v, v.shape
                        if len(s) <= 6:  # MAX_DIMS
                            ins.append(s)
                    elif v is not None:
                        ins = self._all_shapes(args, kwargs)
                        break
                else:
                    ins = tuple(ins[:MAX_INPUTS]) if ins else None
                self.inputs = ins
                took = True
                if self.sparse and self.find_site is not None and self.reads >= self.site_read:
                    self.site = self.find_site()  # where the roots are called: on_oom's (20 µs cold on the H200)
                    self.site_read = self.reads + SITE_READS
                if not self.grad_enabled():
                    self.closing = "eval"
                    self.quiet = 0
                    if not self.posted:
                        self._posts_on()
                if self.t_first is None:
                    self.t_first = t
        except Exception:
            pass
        d = self.clock() - t
        self.cost_s += d
        self.pre_s += d
        if took:
            self.pre_n += 1

    def call_begins(self, args, kwargs, t):
        """A root's generate call begins (Roots.take): whether it is a step of
        its own, which ends when it returns (call_ends). Inside a training
        step that a root call began (a rollout after a forward) it is not,
        as its tokens' root calls were not: the training step keeps its
        inputs. Otherwise its inputs are its arguments' shapes."""
        step = not (self.trained and self.inputs is not None)
        if step:
            if self.inputs is None:
                self.inputs = self._all_shapes(args, kwargs)
            if self.t_first is None:
                self.t_first = t
            self.closing = None
        self.cost_s += self.clock() - t
        return step

    def call_ends(self, t, ok):
        """A root's generate call returned (ok) or raised: one step, or none
        (an out-of-memory error inside it closed the step already: on_oom)."""
        if ok:
            self._close(t, "eval" if self.trained else "forward", False)
        else:
            self.inputs = None
            self.cost_s += self.clock() - t

    def _forward_call(self, args, kwargs, t):
        """A root call not inside another before any optimizer step: a step
        of its own without gradients, or after PROBE_CALLS calls with them."""
        if self.inputs is None:
            self.inputs = self._all_shapes(args, kwargs)
            if self.t_first is None:
                self.t_first = t
        if not self.grad_enabled():
            self.closing = "forward"
        else:
            self.grad_calls += 1
            self.closing = "forward" if self.grad_calls > PROBE_CALLS else None

    def _all_shapes(self, args, kwargs):
        """_shapes, and the type of the first tensor for root_pre's loop."""
        for vs in (args, kwargs.values() if kwargs else ()):
            for v in vs:
                if (_kinds.get(type(v)) or _kind(v)) == _TENSOR:
                    self.ttype = type(v)
                    return _shapes(args, kwargs)
        return _shapes(args, kwargs)

    def _posts_on(self):
        """An evaluation call while the roots have no post-hooks: give them
        theirs (this call's runs at its end too) and count nesting again."""
        self.disarm()
        try:
            self.posts(True)
        except Exception:
            self.closing = None  # no end to this evaluation step: it goes with the next step
            log.debug("vramscope: root post-hooks could not come back", exc_info=True)
            return
        self.posted = True
        self.in_root = 1

    def root_post(self, _module, _args, _out):
        """A root module's forward hook: ends the step root_pre said it ends."""
        if _compiling():
            return
        t = self.clock()
        n = self.in_root - 1
        if n > 0:
            self.in_root = n
        else:
            self.in_root = 0
            phase = self.closing
            if phase is not None:
                self.closing = None
                self._close(t, phase, False)
                return
        self.cost_s += self.clock() - t

    def on_oom(self):
        """Inside the out-of-memory observer: the failing step, as far as it went."""
        self.in_root = 0
        self.closing = None
        self.disarm()
        try:
            if self.inputs is None and not self.pre_full and self.rootcall is not None:  # between reads
                got = self.rootcall()
                if got is not None:
                    self.inputs = self._all_shapes(*got)
        except Exception:
            log.debug("vramscope: no inputs for the failing step", exc_info=True)
        self.close("train" if self.trained else "forward", oom=True)

    def evaluating(self):
        """A root's eval() (train(False)): an evaluation pass may come, whose
        calls only root_pre tells from training steps; sparse, it goes back
        on at once (until the next read step's end, or for the pass)."""
        if self.sparse and not self.pre_full:
            self.disarm()
            self._full_pre(True)

    # --- the agent's threads ----------------------------------------------------

    def _settle(self):
        """Move the raw entries but the newest KEEP_RAW (which _budget reads)
        into `kept`, made into what is sent: the training thread never frees
        an old entry, and what stays for long holds plain tuples (which the
        garbage collector stops tracking), no torch.Size."""
        ring, kept = self.ring, self.kept
        k = min(len(ring) - KEEP_RAW, SETTLE_MAX)
        if k <= 0:
            return
        off = self.wall() - self.clock()
        prev = self.last_raw
        for _ in range(k):
            e = ring.popleft()  # the training thread only appends: this is the oldest
            if len(kept) == kept.maxlen and kept[0][0] >= self.sent:
                self._lose(kept[0][0], kept[0][0] + 1)
            kept.append(self._kept(e, prev, off))
            prev = e
        self.last_raw = prev

    def _kept(self, e, prev, off):
        """A raw entry as kept: (step, unix_ms, dur_us, allocated, reserved,
        peak, inputs, phase, recorded, oom); prev the raw entry before it."""
        step, t, inputs, phase, rec = e[:5]
        oom, a, r, p = e[5:] if len(e) > 5 else (False, -1, -1, -1)
        if prev is not None and prev[0] == step - 1:
            dur = round((t - prev[1]) * 1e6)
        elif step == 0 and self.t_first is not None:
            dur = round((t - self.t_first) * 1e6)
        else:
            dur = 0
        if inputs:
            inputs = tuple(tuple(int(d) for d in s) for s in inputs)
        return step, round((t + off) * 1000), dur, a, r, p, inputs, phase, bool(rec), oom

    def _lose(self, lo, hi):
        """Steps lo..hi-1 went before they were sent (counted once)."""
        lo = max(lo, self.lost_upto)
        if hi > lo:
            self.lost += hi - lo
            self.lost_upto = hi

    def drain(self, n=SEND_MAX):
        """Up to n steps not sent yet, oldest first, as StepLevel dicts."""
        with self.lock:
            self._settle()
            first = self.sent
            out = []
            tail = []
            for e in reversed(self.kept):  # the agent's own: no one appends meanwhile
                if e[0] < first:
                    break
                tail.append(e)
            tail.reverse()
            if len(tail) < n:
                with self.flock:
                    raw = list(self.ring)  # atomic: a C-level copy under the GIL
                    base, pend = self.step, self.times[:]
                if pend and (len(pend) >= self.due or self.rec[0] is not self.was):
                    pend.pop()  # the newest goes to _slow (the hook's test): it may be taking it
                raw.extend((base + i, t, None, "train", self.was) for i, t in enumerate(pend))  # as _flush will keep them
                if raw and raw[-1][0] >= first:
                    off = self.wall() - self.clock()
                    prev = self.last_raw
                    for e in raw:
                        if e[0] >= first:
                            tail.append(self._kept(e, prev, off))
                            if len(tail) >= n:
                                break
                        prev = e
            want = first
            for e in tail[:n]:
                if e[0] > want:
                    self._lose(want, e[0])
                out.append(as_wire(e))
                want = e[0] + 1
            if out:
                self.sent = want
            return out

    def resend(self):
        """After a (re)registration: the daemon may know nothing of this run."""
        with self.lock:
            self.sent = max(self._oldest(), self.step - RING)

    def _oldest(self):
        for q in (self.kept, self.ring):
            try:
                return q[0][0]
            except IndexError:
                pass
        return self.step

    @property
    def dropped(self):
        """Steps that went before they were sent."""
        with self.lock:
            self._lose(self.sent, self._oldest())
            return self.lost

    def cap(self):
        """Bytes the process may use: its memory-fraction cap, else the device's total; 0 unknown."""
        try:
            f = self.fraction() if self.fraction is not None else 1.0
        except Exception:
            f = 1.0
        if self.total <= 0:
            return 0
        return int(self.total * f) if 0.0 < f < 1.0 else int(self.total)

    def params(self, levels):
        return {"device": self.reader.index if self.reader is not None else -1, "cap": self.cap(),
                "levels": levels, "dropped": self.dropped}


def as_wire(e):
    """A kept entry as a StepLevel."""
    step, unix_ms, dur, a, r, p, inputs, phase, rec, oom = e
    d = {"step": step, "unix_ms": unix_ms, "dur_us": dur, "allocated": a, "reserved": r, "peak": p, "phase": phase}
    if inputs:
        d["inputs"] = [list(s) for s in inputs]
    if rec:
        d["recorded"] = True
    if oom:
        d["oom"] = True
    return d


# --- hooking torch ---------------------------------------------------------------


class Roots:
    """Finds the root modules with torch's global module hooks (depth 0 on the
    thread that first calls a module), gives each a hook of its own, and drops
    the global hooks at the first optimizer step, after SETTLE_CALLS root
    calls in a row found no new root, or after PROBE_CALLS root calls."""

    def __init__(self, torch, levels):
        self.torch = torch
        self.levels = levels
        self.depth = 0
        self.thread = None
        self.calls = 0
        self.found_at = 0  # calls when the last new root was found
        self.seen = {}  # id(module) -> module
        self.handles = []  # per-root pre-hooks
        self.roots = []
        self.post_handles = []  # per-root post-hooks, while posted
        self.posted = True
        self.global_handles = []
        self.done = False
        self.paused = False  # pause(): the hooks stay away until resume()
        self.held = False  # a generate call under way (take): the hooks are away until it returns
        self.stepping = False  # ... and it is a step of its own (Levels.call_begins)
        self.wraps = []  # (class, name, whether it had that attribute of its own, the original)
        self.codes = frozenset()  # the code objects of the roots' call path (_rootcall)
        levels.set_pre = self.set_pre
        levels.rootcall = self.rootcall
        levels.find_site = self.site

    def start(self):
        m = self.torch.nn.modules.module
        self.global_handles = [m.register_module_forward_pre_hook(self._pre),
                               m.register_module_forward_hook(self._post)]

    def _pre(self, module, args):
        if _compiling():
            return
        if self.thread is None:
            self.thread = threading.get_ident()
        elif self.thread != threading.get_ident():
            return
        if self.depth == 0 and not self.done:
            self.calls += 1
            if id(module) not in self.seen:
                self.seen[id(module)] = module
                try:
                    self._hook(module)
                except Exception:
                    log.debug("vramscope: no hooks on a root module", exc_info=True)
                else:  # its own pre-hook comes from its next call (its post-hook from this one): args only here
                    self.levels.root_pre(module, args, None)
                self.found_at = self.calls
            if self.calls > PROBE_CALLS or self.calls - self.found_at >= SETTLE_CALLS:
                self.finish()
        self.depth += 1

    def _post(self, _module, _args, _out):
        if _compiling():
            return
        if self.thread == threading.get_ident():
            self.depth = max(0, self.depth - 1)

    @property
    def generates(self):
        """(class, whether it had a generate of its own, the original): the generates wrapped."""
        return [(c, own, orig) for c, name, own, orig in self.wraps if name == "generate"]

    def rootcall(self):
        """Levels.rootcall: inside the out-of-memory observer."""
        lv = self.levels
        return _rootcall.at_oom(self.roots, self.codes, lv.site, lv.tid)

    def site(self):
        """Levels.find_site: from root_pre, the caller of the root's call."""
        return _rootcall.caller(sys._getframe(), self.codes)

    def _hook(self, module):
        self._add_pre(module)
        self.roots.append(module)
        try:
            self.codes = self.codes | _rootcall.call_codes(type(module))
        except Exception:
            log.debug("vramscope: a root's call path not known", exc_info=True)
        if self.posted:
            self._add_post(module)
        for wrap in (self._wrap_generate, self._wrap_train):
            try:
                wrap(type(module))
            except Exception:
                log.debug("vramscope: a root's %s was left as it was", wrap.__name__, exc_info=True)

    def _original(self, cls, name):
        """cls's own function `name` (or one it inherits) to wrap, or None:
        a staticmethod or property stays as it is, as does one wrapped."""
        orig = inspect.getattr_static(cls, name, None)
        if type(orig).__name__ != "function" or getattr(orig, "__vramscope__", False):
            return None
        return orig

    def _wrapped(self, cls, name, orig, fn):
        fn.__vramscope__ = True
        self.wraps.append((cls, name, name in cls.__dict__, orig))
        setattr(cls, name, fn)

    def _wrap_train(self, cls):
        """Give a root's class a `train` (which eval() calls) that tells the
        levels when a root goes into evaluation (Levels.evaluating), on the
        roots' thread; it costs nothing between, unlike a hook."""
        orig = self._original(cls, "train")
        if orig is None:
            return
        roots = self

        @functools.wraps(orig)
        def train(model, *args, **kwargs):
            out = orig(model, *args, **kwargs)
            if not (args[0] if args else kwargs.get("mode", True)):
                roots.evaluating(model)
            return out

        self._wrapped(cls, "train", orig, train)

    def evaluating(self, module):
        """A root's eval(): on the roots' thread, after discovery."""
        try:
            if (self.done and not self.paused and not self.held and id(module) in self.seen
                    and self.thread == threading.get_ident()):
                self.levels.evaluating()
        except Exception:
            log.debug("vramscope: a root's eval() was not seen", exc_info=True)

    def _wrap_generate(self, cls):
        """Give a root's class a `generate` that makes each call on a root one
        step (take, give); on any other instance, thread or nesting it only
        calls the original. On the class, not the instance: a model that is
        copied or pickled carries nothing of the agent's."""
        orig = self._original(cls, "generate")
        if orig is None:
            return
        roots = self

        @functools.wraps(orig)
        def generate(model, *args, **kwargs):
            if not roots.take(model, args, kwargs):
                return orig(model, *args, **kwargs)
            ok = False
            try:
                out = orig(model, *args, **kwargs)
                ok = True
                return out
            finally:
                roots.give(ok)

        self._wrapped(cls, "generate", orig, generate)

    def take(self, module, args, kwargs):
        """A generate call begins: when it is a root's, on the roots' thread,
        outside any root call or other generate, after discovery, the roots'
        hooks go until give(), and the call is one step unless it runs inside
        a training step (Levels.call_begins). False otherwise."""
        lv = self.levels
        if (self.held or self.paused or not self.done or lv.in_root or id(module) not in self.seen
                or self.thread != threading.get_ident() or _compiling()):
            return False
        t = lv.clock()
        self.held = True
        self.stepping = False
        try:
            self._unhook()
            self.stepping = lv.call_begins(args, kwargs, t)
        except Exception:
            log.debug("vramscope: a generate call could not begin a step", exc_info=True)
        return True

    def give(self, ok):
        """The generate call that take() began returned (ok) or raised."""
        lv = self.levels
        t = lv.clock()
        self.held = False
        try:
            if not self.paused:
                self._rehook()
            if self.stepping:
                lv.call_ends(t, ok)
            else:
                lv.cost_s += lv.clock() - t
        except Exception:
            log.debug("vramscope: a generate call could not end its step", exc_info=True)

    def _add_pre(self, module):
        lv = self.levels
        try:
            self.handles.append(module.register_forward_pre_hook(lv.root_pre, with_kwargs=True))
        except TypeError:  # torch < 2.0
            self.handles.append(module.register_forward_pre_hook(lv.root_pre))

    def pause(self):
        """Take the roots' hooks away, keeping the roots (between two of
        their calls): their calls cost nothing and are no steps until resume."""
        self.paused = True
        self._unhook()

    def resume(self):
        """Give the roots their hooks back, as they had them before pause."""
        self.paused = False
        if not self.held:
            self._rehook()

    def _unhook(self):
        hs, self.handles = self.handles, []
        ps, self.post_handles = self.post_handles, []
        _remove(hs)
        _remove(ps)

    def _rehook(self):
        if self.handles:
            return
        for m in self.roots:
            self._add_pre(m)
            if self.posted:
                self._add_post(m)
        self.levels.pre_full = True
        self.levels.disarm()

    def set_pre(self, full):
        """Levels.set_pre: every root's pre-hook root_pre (full), or none
        (their calls then take torch's path without hooks, which an empty
        hook's dispatch alone made 5.6 µs slower on the H200). The hook
        goes into torch's dict under the same handle, not registered anew;
        on a failure the roots get root_pre under new handles and it raises."""
        lv = self.levels
        try:
            for m, h in zip(self.roots, self.handles):
                d = m._forward_pre_hooks
                if full:
                    d[h.id] = lv.root_pre
                else:
                    d.pop(h.id, None)
        except Exception:
            self._unhook()
            self._rehook()
            raise

    def _add_post(self, module):
        lv = self.levels
        try:
            self.post_handles.append(module.register_forward_hook(lv.root_post, always_call=True))
        except TypeError:
            self.post_handles.append(module.register_forward_hook(lv.root_post))

    def set_posts(self, on):
        """Put or take away the roots' post-hooks (Levels.posts)."""
        if on:
            if not self.posted:
                self.posted = True
                if self.handles:  # not while paused or held: _rehook gives them back
                    for m in self.roots:
                        self._add_post(m)
            return
        self.posted = False
        hs, self.post_handles = self.post_handles, []
        _remove(hs)

    def on_optimizer_step(self, *_a, **_k):
        self.depth = 0
        if not self.done:
            self.finish()

    def finish(self):
        """Discovery ends: only the roots keep hooks."""
        self.done = True
        hs, self.global_handles = self.global_handles, []
        _remove(hs)

    def remove(self):
        self.finish()
        self.paused = True  # a generate call still under way gives no hooks back (give)
        self.set_posts(False)
        hs, self.handles = self.handles, []
        _remove(hs)
        self.levels.disarm()
        while self.wraps:
            cls, name, own, orig = self.wraps.pop()
            try:
                if own:
                    setattr(cls, name, orig)
                else:
                    delattr(cls, name)
            except Exception:
                log.debug("vramscope: a root's %s could not be given back", name, exc_info=True)


def _remove(handles):
    """Remove torch hook handles; one that fails is left."""
    for h in handles:
        try:
            h.remove()
        except Exception:
            pass


_wrapped = []  # (owner, name, original)


def wrap_peaks(torch, levels):
    """max_memory_allocated / max_memory_reserved return the peak since the
    program's own last reset_peak_memory_stats, though the agent resets the
    allocator's peak at every step."""
    if _wrapped:
        return
    mem = torch.cuda.memory
    index_of = getattr(torch.cuda, "_get_device_index", None)

    def mine(device):
        if levels.reader is None:
            return False
        try:
            i = index_of(device, optional=True) if index_of is not None else (device or 0)
        except Exception:
            return False
        return i == levels.reader.index

    orig_alloc, orig_res, orig_reset = mem.max_memory_allocated, mem.max_memory_reserved, mem.reset_peak_memory_stats

    def max_memory_allocated(device=None):
        v = orig_alloc(device)
        return max(v, levels.tally[0]) if mine(device) else v

    def max_memory_reserved(device=None):
        v = orig_res(device)
        return max(v, levels.tally[1]) if mine(device) else v

    def reset_peak_memory_stats(device=None):
        orig_reset(device)
        if mine(device):
            levels.tally[0] = levels.tally[1] = 0

    for fn, orig in ((max_memory_allocated, orig_alloc), (max_memory_reserved, orig_res),
                     (reset_peak_memory_stats, orig_reset)):
        fn.__doc__ = orig.__doc__
        fn.__vramscope__ = True
        for owner in (mem, torch.cuda):
            if getattr(owner, orig.__name__, None) is orig:
                setattr(owner, orig.__name__, fn)
                _wrapped.append((owner, orig.__name__, orig))
    mem._orig_reset_peak = orig_reset


def unwrap_peaks():
    while _wrapped:
        owner, name, orig = _wrapped.pop()
        setattr(owner, name, orig)


def start(torch, recording, index_fn, register_step_hook):
    """Levels for this process, its hooks in place; None when torch lacks what it needs.
    index_fn() gives the device index once CUDA is up (asked at the first step's end)."""
    global _compiling
    _compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _not_compiling
    lv = Levels(recording=recording, grad_enabled=getattr(torch, "is_grad_enabled", lambda: True))
    roots = Roots(torch, lv)

    def set_reader():
        idx = index_fn()
        if idx is None:
            return
        lv.reader = Reader(torch, idx)
        try:
            lv.total = int(torch.cuda.get_device_properties(idx).total_memory)
        except Exception:
            lv.total = 0
        frac = getattr(torch.cuda.memory, "get_per_process_memory_fraction", None)
        if frac is not None:
            lv.fraction = lambda: float(frac(idx))

    lv.find_reader = set_reader  # at the first step's end

    def first_step():
        roots.depth = 0
        if not roots.done:
            roots.finish()

    lv.on_first_step = first_step
    lv.posts = roots.set_posts
    handle = register_step_hook(torch, lv.step_hook(), direct=True)
    if handle is None:
        return None, None
    try:
        roots.start()
    except Exception:
        log.info("vramscope: no global module hooks in this torch: steps without input shapes", exc_info=True)
    try:
        wrap_peaks(torch, lv)
    except Exception:
        log.debug("vramscope: could not wrap max_memory_allocated", exc_info=True)
    return lv, (handle, roots)


class StepLevels:
    """This process's levels, from when CUDA is up until the agent detaches:
    the Levels ring and the hooks that feed it (none with VRAMSCOPE_LEVELS=0,
    or where torch lacks the step hook). Started on the training thread (CUDA
    initialisation); read by the agent's link and worker threads, as Levels
    allows."""

    def __init__(self):
        self.levels = None
        self.hooks = None  # (step hook handle, Roots)

    def start(self, torch, recording, index_fn, register_step_hook):
        if _env_off("VRAMSCOPE_LEVELS") or self.levels is not None:
            return
        try:
            self.levels, self.hooks = start(torch, recording, index_fn, register_step_hook)
        except Exception:
            log.warning("vramscope: per-step levels could not start", exc_info=True)

    def params(self, n=SEND_MAX):
        """LevelsParams with up to n steps not sent yet, or None."""
        lv = self.levels
        if lv is None:
            return None
        steps = lv.drain(n)
        return lv.params(steps) if steps else None

    def resend(self):
        """A new daemon knows none of this run's steps."""
        if self.levels is not None:
            self.levels.resend()

    def on_oom(self):
        if self.levels is not None:
            self.levels.on_oom()

    def cost_s(self):
        return self.levels.cost_s if self.levels is not None else 0.0

    def pause(self, paused):
        """Take the root modules' hooks away (paused) or give them back, once
        discovery is over; False when there are none to pause (for measuring
        what the hooks cost: _agent._parts)."""
        if self.hooks is None or not self.hooks[1].done:
            return False
        roots = self.hooks[1]
        roots.pause() if paused else roots.resume()
        return True

    def peak(self, index, p):
        """max_memory_allocated(index) from the allocator's own peak p, which
        the reads reset at each step (wrap_peaks' rule)."""
        lv = self.levels
        if lv is None or lv.reader is None or lv.reader.index != index:
            return p
        return max(p, lv.tally[0])

    def at_step_end(self, fn, timeout, ready=lambda: True):
        """Levels.at_step_end; (False, None) without levels."""
        if self.levels is None or self.hooks is None:
            return False, None
        return self.levels.at_step_end(fn, timeout, ready)

    def next_step_in(self):
        return self.levels.next_step_in() if self.levels is not None else 0.0

    def stop(self):
        """Remove the hooks and the wrappers of torch's peak functions (the ring stays)."""
        if self.hooks is None:
            return
        handle, roots = self.hooks
        self.hooks = None
        for undo in (handle.remove, roots.remove, unwrap_peaks):
            try:
                undo()
            except Exception:
                pass
