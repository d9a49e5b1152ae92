"""The agent's worker thread: agent.dump answers, out-of-memory captures, and
the spool of captures made while no daemon was connected."""
import collections
import json
import os
import stat
import socket as _socket
import sys
import threading
import time

from . import _schedule, _tensors, _torch
from .. import _api, _paths
from ._common import (
    AgentError,
    CAPTURED_TIMEOUT,
    CODE_AGENT_FAILED,
    CODE_INVALID_PARAMS,
    MAX_DUMPS_QUEUED,
    OOM_MIN_INTERVAL,
    RPCError,
    _Disconnected,
    _say,
    log,
)
from ._snapfile import (
    _FileSnapshot,
    _gc_paused,
    _stream_snapshot,
    _take_snapshot,
    _allocated_from_segments,
    _write_snapshot,
    _move,
)


# How long agent.dump waits for a sampled window (the daemon waits 2 minutes).
DUMP_WAIT = 90.0


def _ms(since):
    """Milliseconds since perf_counter() value `since`."""
    return round((time.perf_counter() - since) * 1000.0, 3)


def _oom_between_windows(snap, device, requested, device_free):
    """An out-of-memory error while recording was off: the history (if torch kept
    one) is from an earlier window and does not match the allocator's state, so
    it goes; the failing request becomes the trace's one event, with the Python
    stack that made it (or, on autograd's thread, the backward() call running)."""
    frames = []
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # all of vramscope
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(pkg):
            frames.append({"filename": fn, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    if not frames:
        site = _torch.backward_site[0]
        if site is not None:
            frames = [{"filename": site[0], "line": site[1], "name": "backward"}]
    traces = snap.get("device_traces") or []
    n = max(len(traces), int(device) + 1)
    new = [[] for _ in range(n)]
    new[int(device)] = [{"action": "oom", "addr": 0, "size": int(requested), "stream": 0,
                         "time_us": int(time.time() * 1e6), "device_free": int(device_free), "frames": frames}]
    snap["device_traces"] = new


def _memory_caps(torch, snap):
    """[[device, bytes], ...]: the per-process cap (set_per_process_memory_fraction)
    of each device the snapshot has segments on, where one below the device's
    memory is set, so that an OOM under a cap says the cap exactly. Asks only
    devices already in use (asking another would initialise it); [] when this
    torch cannot say (get_per_process_memory_fraction came in 2.8). Never raises."""
    try:
        fraction = torch.cuda.memory.get_per_process_memory_fraction
        devices = sorted({int(s.get("device", 0)) for s in snap.get("segments") or () if isinstance(s, dict)})
        caps = []
        for d in devices:
            f = float(fraction(d))
            if 0.0 < f < 1.0:
                caps.append([d, int(f * torch.cuda.get_device_properties(d).total_memory)])
        return caps
    except Exception:
        return []


# How long a walk beside the user's step waits for the backward() running.
WALK_WAIT_S = 10.0


def _walk_beside(torch, levels):
    """The tensor walk of a snapshot taken beside the user's step. In a
    program that makes optimizer steps it runs on the training thread at the
    next step's end (where no forward or backward runs, and the held memory
    is what outlives a step); otherwise (no training step is under way, or
    none ends within three steps' time, at least 1 s, at most WALK_WAIT_S:
    Levels.next_step_in), on this thread under _torch.graph_lock, which no
    backward() holds meanwhile. The walk reads saved tensors, graph nodes
    and .grad, which autograd's threads release and replace without the
    GIL: read during a backward they crashed a GPT-2 loop on the H200
    (free(): invalid pointer, 2026-12-03). None when neither came in time."""
    wait = min(WALK_WAIT_S, levels.next_step_in()) if levels is not None else 0.0
    if wait > 0:
        ran, names = levels.at_step_end(lambda: _tensors.name_tensors(torch), wait,
                                        ready=lambda: _torch.backward_depth[0] == 0)
        if ran:
            log.info("vramscope: the tensor walk ran at a step's end")
            return names
        log.info("vramscope: no step ended in %.1f s: the tensor walk runs beside the program", wait)
    if not _torch.walk_lock(WALK_WAIT_S):
        log.info("vramscope: no tensor names: a backward() ran for %.0f s", WALK_WAIT_S)
        return None
    try:
        return _tensors.name_tensors(torch)
    finally:
        _torch.graph_lock.release()


def _name_into(snap, beside=False, levels=None):
    """Add the names of the live CUDA tensors (_tensors) to a snapshot dict as
    "vramscope_tensors"; off with VRAMSCOPE_NAME_TENSORS=0. Never raises.
    beside: the snapshot was taken beside the user's step, and the walk must
    not run while autograd releases what it reads (_walk_beside; levels the
    process's StepLevels)."""
    if not isinstance(snap, dict) or os.environ.get("VRAMSCOPE_NAME_TENSORS", "1") == "0":
        return False
    try:
        torch = _torch.imported()
        if torch is None:
            names = None
        elif beside:
            names = _walk_beside(torch, levels)
        else:
            names = _tensors.name_tensors(torch)
    except Exception:
        log.warning("vramscope: naming tensors failed", exc_info=True)
        return False
    if names is None:
        return False
    caps = _memory_caps(torch, snap)
    if caps:
        names["memory_caps"] = caps
    snap["vramscope_tensors"] = names
    log.info("vramscope: named %d tensor storages in %.0f ms%s", len(names["entries"]), names["took_ms"],
             " (truncated)" if names["truncated"] else "")
    return True


class Jobs:
    """The worker's queue: an out-of-memory capture goes before anything
    queued (it must be written before the process exits), and at most
    MAX_DUMPS_QUEUED agent.dump requests wait (a daemon that sends thousands
    must not delay a capture); put() says whether the job was taken."""

    def __init__(self):
        self.cond = threading.Condition()
        self.urgent, self.rest = collections.deque(), collections.deque()

    def put(self, job):
        with self.cond:
            if job is not None and job[0] == "dump" and sum(1 for j in self.rest if j and j[0] == "dump") >= MAX_DUMPS_QUEUED:
                return False
            (self.urgent if job is not None and job[0] == "capture" else self.rest).append(job)
            self.cond.notify()
            return True

    def get(self):
        with self.cond:
            while not self.urgent and not self.rest:
                self.cond.wait()
            return (self.urgent or self.rest).popleft()

    def qsize(self):
        with self.cond:
            return len(self.urgent) + len(self.rest)


class Captures:
    """The worker thread (vramscope-worker, started by the first job) and its
    state, under its own lock. It talks to the daemon through link (request,
    respond, registered, incoming_dir); schedule() is the recording's Schedule
    or None, levels the process's StepLevels, device() the CUDA device it uses."""

    def __init__(self, link, pid, stop, schedule, levels, device):
        self.link = link
        self.pid = pid
        self.stop = stop  # the agent's
        self.schedule = schedule
        self.levels = levels
        self.device = device
        self.lock = threading.Lock()  # worker, pending, last_oom
        self.jobs = Jobs()
        self.worker = None
        self.pending = 0  # out-of-memory captures taken and not yet handed over (or spooled)
        self.handing = None  # (name, path, params) of the capture waiting for agent.captured's answer
        self.count = 0  # out-of-memory captures this process made
        self.last_oom = None

    def dump(self, gen, rid, params):
        """The daemon's agent.dump (from the link's thread): queued for the worker."""
        self.submit(("dump", gen, rid, params))

    def handover(self):
        """Hand the spooled captures to the daemon (after a registration)."""
        self.submit(("handover",))

    def close(self):
        """Let the worker end once the jobs queued before are done."""
        self.jobs.put(None)

    def submit(self, job):
        with self.lock:
            if self.worker is None:
                self.worker = threading.Thread(target=self._work, name="vramscope-worker", daemon=True)
                self.worker.start()
        if not self.jobs.put(job):
            log.warning("vramscope: refused agent.dump: %d dumps already queued", MAX_DUMPS_QUEUED)
            self.link.respond(job[1], job[2], error=(CODE_AGENT_FAILED, "agent.dump refused: %d dumps already queued"
                                                % MAX_DUMPS_QUEUED))

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            try:
                if job[0] == "dump":
                    self._dump(*job[1:])
                elif job[0] == "capture":
                    self._capture(*job[1:])
                elif job[0] == "handover":
                    self._handover()
            except Exception:
                log.warning("vramscope: %s failed", job[0], exc_info=True)
            finally:
                if job[0] == "capture":
                    with self.lock:
                        self.pending -= 1

    def _check_dump_path(self, path):
        incoming = self.link.incoming_dir
        if not incoming:
            return "not registered: no incoming dir"
        if not isinstance(path, str) or not path:
            return "params.path must be a non-empty string"
        if not os.path.isabs(path):
            return "path %r is not absolute" % path
        if not path.endswith(".part") or os.path.basename(path) in ("", ".part"):
            return "path %r must end in .part" % path
        parent = os.path.realpath(os.path.dirname(path))
        root = os.path.realpath(incoming)
        try:
            inside = os.path.commonpath([parent, root]) == root
        except ValueError:
            inside = False
        if not inside:
            return "path %r is outside the incoming dir %s" % (path, incoming)
        return None

    def _dump(self, gen, rid, params):
        path = params.get("path") if isinstance(params, dict) else None
        bad = self._check_dump_path(path)
        if bad:
            log.warning("vramscope: refused agent.dump: %s", bad)
            self.link.respond(gen, rid, error=(CODE_INVALID_PARAMS, "agent.dump refused: " + bad))
            return
        t0 = time.perf_counter()
        sched = self.schedule()
        why = sched.wait_recorded(DUMP_WAIT) if sched is not None else None
        phases = {"wait": _ms(t0)}
        if why and why != _schedule.STALLED:
            self.link.respond(gen, rid, error=(CODE_AGENT_FAILED, "agent.dump failed: " + why))
            return
        # The cyclic GC stays off until the snapshot is written and freed:
        # switched back on right after _snapshot(), it would first traverse
        # all of the snapshot's fresh dicts and lists (none of which can be in
        # a cycle): 16 ms of a 100k-entry capture on the H200 host, about a
        # third of what the capture added to torch's _snapshot() (agent.dump
        # took 147 ms, 95 of them in _snapshot() and 36 writing; 2026-11-29).
        # The answer goes out once the collector is on again (a caller that
        # looks right after the answer finds the process as it was).
        with _gc_paused():
            answer = self._dump_paused(path, params, t0, sched, why, phases)
        self.link.respond(gen, rid, **answer)

    def _dump_paused(self, path, params, t0, sched, why, phases):
        """Take and write the snapshot; returns respond()'s keywords."""
        try:
            try:
                t1 = time.perf_counter()
                at_ms = time.time() * 1000.0  # the ranks of a group are compared by this (its skew)
                snap = _take_snapshot()
                phases["snapshot"] = _ms(t1)
            finally:
                if sched is not None and not why:
                    sched.release()
            if why == _schedule.STALLED and isinstance(snap, dict):
                # Recording is off and the program makes no steps: the history
                # (if any) is an old window's; keep the allocator's state only.
                snap["device_traces"] = [[] for _ in snap.get("device_traces") or [()]]
            t1 = time.perf_counter()
            if _name_into(snap, beside=True, levels=self.levels):
                phases["names"] = _ms(t1)
            stream = params.get("stream")
            streamed = None
            t2 = time.perf_counter()
            if isinstance(snap, dict) and self._stream_ok(stream, path):
                streamed = _stream_snapshot(stream, snap, phases)
            if streamed is not None:
                size, entries = streamed
            else:
                size, entries = _write_snapshot(path, snap)
            phases["write"] = round(_ms(t2) - phases.get("open", 0.0), 3)  # disjoint phases
        except AgentError as e:
            return {"error": (e.code, "agent.dump failed: %s" % e)}
        except Exception as e:
            log.warning("vramscope: agent.dump failed", exc_info=True)
            return {"error": (CODE_AGENT_FAILED, "agent.dump failed: %s: %s" % (type(e).__name__, e))}
        took = (time.perf_counter() - t0) * 1000.0
        result = {"path": path, "bytes": size, "entries": entries, "took_ms": round(took, 3),
                  "device": self.device(), "streamed": streamed is not None, "phases_ms": phases,
                  "at_ms": round(at_ms, 3)}
        return {"result": result, "levels": True}  # the answer carries the steps not sent yet

    def _stream_ok(self, stream, path):
        """Whether the daemon's stream is a FIFO beside the dump path (else the
        pickle goes to path, as for a daemon that offers no stream)."""
        if not isinstance(stream, str) or stream != path + ".fifo":
            return False
        try:
            return stat.S_ISFIFO(os.lstat(stream).st_mode)
        except OSError:
            return False

    def on_oom(self, device, requested, device_total, device_free):
        """The OOM observer's work inside torch's callback: take the snapshot now,
        before the OutOfMemoryError unwinds; the worker writes and hands it over."""
        now = time.monotonic()
        with self.lock:
            if self.pending or (self.last_oom is not None and now - self.last_oom < OOM_MIN_INTERVAL):
                log.debug("vramscope: repeated out-of-memory callback ignored")
                return
            self.last_oom = now
            self.pending += 1
        queued = False
        try:
            t0 = time.perf_counter()
            sched = self.schedule()
            between = sched is not None and not sched.recording()
            at_ms = time.time() * 1000.0  # when this rank's state was read, for its group's skew
            snap = _take_snapshot()
            self.levels.on_oom()  # the failing step, as far as it went (after the snapshot: it comes first)
            if isinstance(snap, _FileSnapshot):  # test hook: read it now, like torch's snapshot
                with open(snap.path, "rb") as f:
                    snap = f.read()
            if between and isinstance(snap, dict):
                _oom_between_windows(snap, device, requested, device_free)
            _name_into(snap)
            took = (time.perf_counter() - t0) * 1000.0
            allocated = _allocated_from_segments(snap, device) if isinstance(snap, dict) else -1
            oom = {"device": int(device), "requested": int(requested), "device_free": int(device_free),
                   "device_allocated": int(allocated), "device_total": int(device_total), "_at_ms": at_ms}
            self.submit(("capture", snap, oom, took))
            queued = True
        finally:
            if not queued:
                with self.lock:
                    self.pending -= 1

    def _capture(self, snap, oom, took_ms):
        try:
            self._capture_one(snap, oom, took_ms)
        finally:
            self.handing = None

    def spool_unanswered(self):
        """At exit, when the daemon has not answered agent.captured in time
        (hung): move the snapshot from its incoming dir, where a restarted
        daemon would delete it as an unfinished upload, to this agent's spool,
        to be handed over by the next agent of this program."""
        h = self.handing
        if h is None:
            return None
        name, path, params = h
        try:
            return self._spool_file(name, path, params)
        except OSError:  # the daemon took it after all
            return None

    def _capture_one(self, snap, oom, took_ms):
        self.count += 1
        at_ms = oom.pop("_at_ms", None)
        name = "oom-%d-%d-%d" % (self.pid, int(time.time() * 1000), self.count)
        device = oom["device"]
        incoming = self.link.incoming_dir if self.link.registered else None
        if incoming:
            path = os.path.join(incoming, name + ".part")
            t0 = time.perf_counter()
            try:
                size, entries = _write_snapshot(path, snap)
            except Exception as e:
                log.warning("vramscope: could not write to the incoming dir (%s): spooling", e)
                self._spool(name, snap, oom, took_ms)
                return
            params = {"path": path, "bytes": size, "entries": entries,
                      "took_ms": round(took_ms + (time.perf_counter() - t0) * 1000.0, 3),
                      "device": device, "reason": "oom", "oom": oom}
            if at_ms:
                params["at_ms"] = round(at_ms, 3)
            self.handing = (name, path, params)  # for _at_exit, if the daemon never answers
            try:
                # params carry the steps up to the failing one not sent yet, sent after
                # the agent.levels queued before them (the daemon stores what it has then)
                res = self.link.request(_api.AGENT_CAPTURED, params, CAPTURED_TIMEOUT, levels=True) or {}
                _say("oom-%d" % self.count, "out of memory on cuda:%d: snapshot handed to the daemon%s"
                     % (device, (" (%s)" % res["id"]) if isinstance(res, dict) and res.get("id") else ""))
                return
            except RPCError as e:
                _say("oom-%d" % self.count, "out of memory on cuda:%d: the daemon refused the snapshot (%s)%s"
                     % (device, e, ("; it stays at %s" % path) if os.path.exists(path) else ""))
                return
            except _Disconnected:
                # the daemon went away: keep the file in the spool for the next connection
                try:
                    spooled = self._spool_file(name, path, params)
                    _say("oom-%d" % self.count, "out of memory on cuda:%d: the daemon went away; snapshot "
                         "saved to %s" % (device, spooled))
                except Exception:
                    log.warning("vramscope: could not spool %s", path, exc_info=True)
                return
        self._spool(name, snap, oom, took_ms)

    def _spool(self, name, snap, oom, took_ms):
        d = _paths.spool_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        part = os.path.join(d, name + ".pickle.part")
        t0 = time.perf_counter()
        size, entries = _write_snapshot(part, snap)
        final = os.path.join(d, name + ".pickle")
        os.replace(part, final)
        params = {"path": final, "bytes": size, "entries": entries,
                  "took_ms": round(took_ms + (time.perf_counter() - t0) * 1000.0, 3),
                  "device": oom["device"], "reason": "oom", "oom": oom}
        self._write_sidecar(final, params)
        _say("oom-%d" % self.count, "out of memory on cuda:%d; no daemon connected: snapshot saved to %s "
             "(handed to the daemon when it is back)" % (oom["device"], final))
        # a daemon may have come back while we wrote
        if self.link.registered:
            self.submit(("handover",))

    def _spool_file(self, name, path, params):
        d = _paths.spool_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        final = os.path.join(d, name + ".pickle")
        _move(path, final)
        params = dict(params, path=final)
        self._write_sidecar(final, params)
        return final

    def _write_sidecar(self, pickle_path, params):
        side = {"pid": self.pid, "host": _socket.gethostname(), "argv": list(getattr(sys, "argv", []) or []),
                "time_ms": int(time.time() * 1000), "captured": params}
        tmp = pickle_path[:-len(".pickle")] + ".json.part"
        with open(tmp, "w") as f:
            json.dump(side, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, pickle_path[:-len(".pickle")] + ".json")

    def _handover(self):
        """Hand this process's spooled OOM snapshots to the daemon (moved into incoming_dir)."""
        d = _paths.spool_dir()
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        for n in names:
            if not n.endswith(".json") or not n.startswith("oom-%d-" % self.pid):
                continue
            if not self.link.registered or self.stop.is_set():
                return
            side_path = os.path.join(d, n)
            pick = side_path[:-len(".json")] + ".pickle"
            try:
                with open(side_path) as f:
                    side = json.load(f)
                if side.get("pid") != self.pid or not os.path.exists(pick):
                    continue
                incoming = self.link.incoming_dir
                dst = os.path.join(incoming, os.path.basename(pick)[:-len(".pickle")] + ".part")
                _move(pick, dst)
            except Exception:
                log.warning("vramscope: could not hand over %s", pick, exc_info=True)
                continue
            params = dict(side.get("captured") or {}, path=dst)
            try:
                self.link.request(_api.AGENT_CAPTURED, params, CAPTURED_TIMEOUT)
            except RPCError as e:
                log.warning("vramscope: the daemon refused spooled snapshot %s: %s", dst, e)
                os.unlink(side_path)
                continue
            except _Disconnected:
                try:
                    _move(dst, pick)  # back to the spool for the next connection
                except OSError:
                    pass
                return
            try:
                os.unlink(side_path)
            except OSError:
                pass
            log.info("vramscope: handed spooled snapshot %s to the daemon", dst)
