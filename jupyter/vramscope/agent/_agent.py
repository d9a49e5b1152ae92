"""The in-process agent: one background thread that talks to the vramscope daemon.

Promises (each has a test in jupyter/tests):
- attach() returns at once; all socket I/O happens on the agent's daemon
  threads, never on the program's; a missing, hung or restarting daemon costs
  the program nothing (timeouts, reconnect with backoff 0.5 s doubling to 5 s,
  re-register when it is back);
- outgoing notifications go through a bounded queue that drops (and counts)
  instead of blocking;
- an exception in the agent is logged (logger "vramscope"), never raised into
  the program.

Wire: JSON-RPC 2.0, one message per line, on the daemon's Unix socket
(daemon/api/api.go). The agent sends daemon.hello, agent.register,
agent.captured (requests, its own integer ids) and agent.torch
(notification, about 1 Hz); it answers the daemon's agent.dump requests.

Test hooks (not for production use):
- env VRAMSCOPE_TEST_SNAPSHOT=/path/file.pickle: a "snapshot" is a byte copy of
  that file (entries reported as -1), so dumps and OOM captures can be tested
  without torch or a GPU;
- _simulate_oom(...): runs the out-of-memory observer as torch would.
- _parts(on): takes the root hooks and the stack sampler away or back (cost measurements).

The Agent is made of parts, each with its own state: the link to the daemon
(_link.Link, the vramscope-agent thread), the recording and its schedule
(_recording.Recording), the per-step levels (_levels.StepLevels) and the
captures (_capture.Captures, the vramscope-worker thread); the stack sampler
(_stacks) runs beside them.
"""
import atexit
import os
import socket as _socket
import sys
import threading
import time

from . import _levels, _recording, _schedule, _stacks, _torch
from .. import _api, _paths
from ._common import (
    _env_int,
    _env_off,
    _env_rank,
    _say,
    log,
)
from ._capture import Captures
from ._link import Link

_lock = threading.RLock()  # attach / detach
_agent = None
_process_hooks = []


class Agent:
    """One attached agent: what it asked for (opts), where torch and CUDA are,
    and the parts it is made of, each with its own state: the link to the
    daemon (a thread), the recording and its schedule, the per-step levels
    and the captures (the worker thread). The parts talk through the
    callables and methods handed to them here, never through the agent's
    attributes."""

    def __init__(self, opts, auto):
        self.opts = opts
        self.auto = auto
        self.pid = os.getpid()
        self.stop = threading.Event()
        self.recording = _recording.Recording()
        self.levels = _levels.StepLevels()
        self.link = Link(opts.get("socket") or _paths.socket_path(), self.stop, facts=self.facts,
                         counters=self.counters, levels=self.levels.params, on_registered=self._registered,
                         on_dump=self._dump)
        self.captures = Captures(self.link, self.pid, self.stop, lambda: self.recording.schedule, self.levels,
                                 self.device)
        self.import_hook = None
        self.torch_installed = None
        self.cuda_hook = None  # "now" | "queued" | None
        self.init_device = None
        self.no_cuda = False
        self.oom_hooked = False

    # --- lifecycle ----------------------------------------------------------------

    def start(self):
        torch = _torch.imported()
        self.torch_installed = torch is not None or _torch.installed()
        if torch is not None:
            self.on_torch(torch)
        elif self.torch_installed:
            from . import _importhook

            self.import_hook = _importhook.install(self._torch_imported)
        else:
            log.warning("vramscope: torch is not installed: counters only")
            if not self.auto:
                _say("no-torch", "torch is not installed: registering for counters only (no allocator recording)")
        if not self.auto:
            self.start_thread()

    def start_thread(self):
        if self.link.start():
            self.start_stacks()

    def start_stacks(self):
        """Where each thread is (agent.stacks): the stack sampler, beside the agent thread."""
        try:
            _stacks.start(self.link.notify)
        except Exception:
            log.warning("vramscope: could not start the stack sampler", exc_info=True)

    def shutdown(self, wait=2.0):
        self.link.flush()
        self.stop.set()
        _stacks.stop()
        if self.import_hook is not None:
            from . import _importhook

            _importhook.uninstall(self.import_hook)
        self.link.close()
        t = self.link.thread
        if t is not None and t is not threading.current_thread():
            t.join(wait)
        self.captures.close()
        torch = _torch.imported()
        _torch.unwrap_backward()
        self.recording.end_schedule()
        self.levels.stop()
        self.recording.stop(torch)

    def notify(self, method, params):
        """Queue a notification for the daemon; never blocks (drops when the queue is full)."""
        self.link.notify(method, params)

    def _registered(self):
        """After each registration (the link's thread)."""
        self.levels.resend()  # a new daemon knows none of this run's steps
        self.captures.handover()

    def _dump(self, gen, rid, params):
        self.captures.dump(gen, rid, params)

    # --- torch --------------------------------------------------------------------

    def _torch_imported(self, torch):
        if _agent is self and not self.stop.is_set():
            self.on_torch(torch)

    def on_torch(self, torch):
        """The program has imported torch: annotate backward, and arrange recording,
        the OOM observer and (auto mode) registration for when CUDA initialises."""
        opts = self.opts
        if opts["annotate_backward"]:
            try:
                _torch.wrap_backward(torch)
            except Exception:
                log.warning("vramscope: could not wrap backward", exc_info=True)
        if opts["record"]:
            self.recording.want()
        # (auto mode registers only once CUDA is up: no need to ask, nor to load NVML in
        # every process that imports torch)
        if not self.auto and _torch.cuda_unavailable(torch):
            self.no_cuda = True
            log.warning("vramscope: CUDA is not available: counters only")
            if not self.auto:
                _say("no-cuda", "CUDA is not available: registering for counters only (no allocator recording)")
        self.cuda_hook = _torch.on_cuda_init(torch, self._cuda_init)
        if self.cuda_hook is None:
            self.recording.cannot_start("cannot hook CUDA initialisation (torch.cuda._lazy_call failed)")
            log.warning("vramscope: %s", self.recording.error or "cannot hook CUDA initialisation")

    def _cuda_init(self):
        """Runs inside torch's CUDA initialisation (or at once when CUDA is up): must not raise."""
        try:
            if _agent is not self or self.stop.is_set():
                return
            torch = _torch.imported()
            if torch is None:
                return
            self.no_cuda = False
            try:
                self.init_device = int(torch.cuda.current_device())
            except Exception:
                self.init_device = None
            self._start_levels(torch)  # before the schedule's step hook: a step's "recorded" is its own
            if self.opts["record"]:
                def allocations():
                    idx = self._torch_index(torch)
                    return _torch.allocations(torch, idx) if idx is not None else -1

                self.recording.start(torch, self.opts, allocations)
            if self.opts["oom"]:
                try:
                    self.oom_hooked = _torch.attach_oom_observer(torch, _oom_observer)
                except Exception:
                    log.warning("vramscope: could not attach the out-of-memory observer", exc_info=True)
            if self.auto:
                self.start_thread()
        except Exception:
            log.warning("vramscope: CUDA-init hook failed", exc_info=True)

    def _start_levels(self, torch):
        self.levels.start(torch, _torch.recording, lambda: self._torch_index(torch),
                          _torch.register_step_hook)

    def _torch_index(self, torch):
        return _torch.torch_index(torch, _env_rank("LOCAL_RANK"), self.init_device)

    def counters(self):
        """agent.torch's params (the allocator's counters now), or None before CUDA is up."""
        torch = _torch.imported()
        if torch is None or not _torch.cuda_initialized(torch):
            return None
        try:
            idx = self._torch_index(torch)
            if idx is None:
                return None
            a, r, p = _torch.counters(torch, idx)
            m = self.levels.peak(idx, p)
        except Exception:
            log.debug("torch counters failed", exc_info=True)
            return None
        return {"time_ms": int(time.time() * 1000), "device": self.device(), "allocated": a, "reserved": r,
                "max_allocated": m}

    def device(self):
        """The CUDA device this process uses, by its CUDA numbering: the one it
        holds memory on; before it holds any, LOCAL_RANK (torchrun) or the
        current device when CUDA initialised; else -1. (LOCAL_RANK alone was
        wrong for ranks sharing a GPU or each given one by CUDA_VISIBLE_DEVICES.)"""
        torch = _torch.imported()
        used = _torch.used_device(torch) if torch is not None else None
        if used is not None:
            return used
        lr = _env_rank("LOCAL_RANK")
        if lr is not None:
            return lr
        if self.init_device is not None:
            return self.init_device
        return -1

    def note(self):
        if not self.torch_installed and _torch.imported() is None:
            return "torch is not installed"
        if self.no_cuda:
            return "CUDA is not available"
        if not self.opts["record"]:
            return "recording disabled"
        if self.recording.state == "failed":
            return self.recording.error or "recording could not start"
        return ""

    def facts(self):
        """RegisterParams."""
        torch = _torch.imported()
        tv, cv = _torch.versions(torch) if torch is not None else ("", "")
        argv = list(getattr(sys, "argv", None) or getattr(sys, "orig_argv", None) or [])
        f = {
            "pid": self.pid,
            "host": _socket.gethostname(),
            "rank": _env_rank("RANK") or 0,
            "local_rank": _env_rank("LOCAL_RANK") or 0,
            "world_size": _env_rank("WORLD_SIZE") or 1,
            "argv": [str(a) for a in argv],
            "python": "%d.%d.%d" % tuple(sys.version_info[:3]),
            "device": self.device(),
            "recording": self.recording.registers_as_recording(self.no_cuda),
            "max_entries": self.opts["max_entries"],
            "api_version": _api.API_VERSION,
        }
        f.update(_job_facts())
        uuid = _torch.device_uuid(torch, f["device"]) if torch is not None else ""
        if uuid:
            f["device_uuid"] = uuid  # the daemon finds NVML's index of the device from it
        if tv:
            f["torch"] = tv
        if cv:
            f["cuda"] = cv
        n = self.note()
        if n:
            f["note"] = n
        return f

    # --- status -------------------------------------------------------------------

    def threads(self):
        """The agent's own threads by part (None where a part has none): the
        link, the capture worker, the sampling clock and the stack sampler."""
        sampler = _stacks.sampler()  # the stack sampler's thread: left out of cost() before (docs/inference.md)
        return {"link": self.link.thread, "worker": self.captures.worker, "clock": self.recording.clock(),
                "sampler": getattr(sampler, "thread", None)}

    def cost(self):
        """What the agent has cost the process so far, as it measures itself:
        seconds inside the optimizer-step hook and the backward wrapper (on the
        training thread), and the CPU seconds of its own threads — the link, the
        capture worker, the sampling clock and the stack sampler — (which take
        the GIL from the training thread at worst). docs/oom-naming.md uses them to
        bound the default mode's cost per step."""
        threads = sum(_thread_cpu_s(t) for t in self.threads().values())
        return {"hook_s": round(self.recording.hook_s(), 6), "levels_s": round(self.levels.cost_s(), 6),
                "backward_wrapper_s": round(_torch.wrapper_s[0], 6),
                "agent_threads_cpu_s": round(threads, 6)}

    def status(self):
        link = self.link
        st = {
            "attached": not self.stop.is_set(),
            "mode": "auto" if self.auto else "attach",
            "pid": self.pid,
            "socket": link.socket_path,
            "connected": link.connected,
            "registered": link.registered,
            "registrations": link.registrations,
            "incoming_dir": link.incoming_dir,
        }
        st.update(self.recording.status())
        st.update({
            "cost": self.cost(),
            "oom_observer": self.oom_hooked,
            "note": self.note(),
            "dropped": link.dropped,
            "queued": link.queued(),
            "oom_captures": self.captures.count,
            "last_error": link.last_error,
        })
        return st


def _thread_cpu_s(t):
    """CPU seconds a live thread has used (Linux and macOS), else 0."""
    try:
        if t is None or t.ident is None or not t.is_alive():
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    except (AttributeError, OSError, ValueError):
        return 0.0


# --- module API ---------------------------------------------------------------------


def _oom_observer(device, alloc, device_total, device_free):
    """Registered with torch._C._cuda_attach_out_of_memory_observer. torch calls it
    as (device, bytes requested, device total or the memory-fraction limit, device
    free) before it raises OutOfMemoryError; it must not raise."""
    a = _agent
    if a is None or a.stop.is_set() or not a.opts.get("oom"):
        return
    try:
        a.captures.on_oom(device, alloc, device_total, device_free)
    except Exception:
        log.warning("vramscope: out-of-memory capture failed", exc_info=True)


def _simulate_oom(device=0, requested=1 << 30, device_total=80 << 30, device_free=1 << 20):
    """Test hook: run the out-of-memory observer as torch would (use with VRAMSCOPE_TEST_SNAPSHOT)."""
    _oom_observer(device, requested, device_total, device_free)


def _parts(on):
    """For measuring what the attached agent's parts cost a program, call by
    call (examples/inference/cost.py --alternate): on=False takes away the
    root modules' hooks and pauses the stack sampler (its thread waits without
    waking); on=True gives both back.
    The link, the sampling clock and the OOM observer stay. Call it between
    two of the program's calls, on its thread; False when there is no agent or
    its root discovery has not ended."""
    a = _agent
    if a is None or not a.levels.pause(not on):
        return False
    _stacks.pause(not on)
    return True


def _notify(method, params):
    """Test hook / internal: queue a notification for the daemon (drops when full)."""
    a = _agent
    if a is not None:
        a.notify(method, params)


def attach(max_entries=100_000, stacks="python", record=True, socket=None, oom=True, annotate_backward=True,
           sample=None, _auto=False):
    global _agent
    if stacks not in ("python", "all"):
        raise ValueError("stacks must be 'python' or 'all', not %r" % (stacks,))
    try:
        max_entries = int(max_entries)
    except (TypeError, ValueError):
        raise ValueError("max_entries must be a positive integer, not %r" % (max_entries,)) from None
    if max_entries <= 0:
        raise ValueError("max_entries must be a positive integer, not %r" % (max_entries,))
    if _env_off("VRAMSCOPE_RECORD"):
        record = False
    sample = _schedule.parse(sample)
    opts = {"max_entries": max_entries, "stacks": stacks, "record": bool(record), "socket": socket,
            "oom": bool(oom), "annotate_backward": bool(annotate_backward), "sample": sample}
    with _lock:
        if _agent is not None and _agent.pid == os.getpid() and not _agent.stop.is_set():
            log.info("vramscope: already attached")
            return _agent.status()
        _install_process_hooks()
        a = Agent(opts, auto=_auto)
        _agent = a
        try:
            a.start()
        except Exception as e:
            a.link.last_error = "%s: %s" % (type(e).__name__, e)
            log.warning("vramscope: attach failed", exc_info=True)
        return a.status()


def auto_attach(torch_module=None):
    """Auto mode (VRAMSCOPE_AUTO=1, from the bootstrap), right after torch finished
    importing: annotate backward now; start recording, the OOM observer and the
    agent thread only when CUDA initialises. Never raises."""
    stacks = os.environ.get("VRAMSCOPE_STACKS", "python")
    try:
        attach(max_entries=_env_int("VRAMSCOPE_MAX_ENTRIES", 100_000),
               stacks=stacks if stacks in ("python", "all") else "python",
               record=not _env_off("VRAMSCOPE_RECORD"),
               socket=os.environ.get("VRAMSCOPE_SOCKET") or None,
               oom=not _env_off("VRAMSCOPE_OOM"),
               annotate_backward=not _env_off("VRAMSCOPE_ANNOTATE_BACKWARD"),
               _auto=True)
    except Exception as e:
        _say("auto", "could not attach: %s: %s" % (type(e).__name__, e))


def detach():
    global _agent
    with _lock:
        a, _agent = _agent, None
    if a is not None:
        try:
            a.shutdown()
        except Exception:
            log.warning("vramscope: detach failed", exc_info=True)


def status():
    a = _agent
    if a is None:
        return {"attached": False, "connected": False, "registered": False, "recording": False,
                "socket": _paths.socket_path(), "dropped": 0, "last_error": None}
    return a.status()


def _at_exit():
    """Let a pending out-of-memory snapshot reach the daemon (or the spool) before
    the interpreter goes, then close the connection."""
    a = _agent
    if a is None or a.pid != os.getpid():
        return
    wait = float(_env_int("VRAMSCOPE_EXIT_WAIT", 30))
    deadline = time.monotonic() + wait
    while a.captures.pending > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if a.captures.pending > 0:
        spooled = a.captures.spool_unanswered()
        if spooled:
            _say("oom-exit", "the daemon did not take the out-of-memory snapshot within %.0f s; saved to %s "
                 "(handed over when a daemon is back)" % (wait, spooled))
    try:
        a.link.flush()
        a.stop.set()
        a.link.close()
    except Exception:
        pass


def _after_fork_child():
    """A forked child is another process: it inherits no agent (it attaches its own, if any)."""
    global _agent, _lock
    _lock = threading.RLock()
    a, _agent = _agent, None
    _stacks._sampler = None  # its thread is the parent's
    if a is not None:
        a.link.forget_after_fork()  # closes the child's copy of the descriptor only


def _install_process_hooks():
    if _process_hooks:
        return
    _process_hooks.append(True)
    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_child)


def _job_facts():
    """What ties this process to the other ranks of its launch, for the
    daemon's group capture (RegisterParams' run_id, master_addr, master_port,
    ppid): torchrun's run id, the rendezvous address and the parent."""
    f = {"ppid": os.getppid()}
    for key, env in (("run_id", "TORCHELASTIC_RUN_ID"), ("master_addr", "MASTER_ADDR"), ("master_port", "MASTER_PORT")):
        v = os.environ.get(env, "").strip()
        if v:
            f[key] = v[:256]
    return f
