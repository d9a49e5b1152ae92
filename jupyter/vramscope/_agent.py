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
"""
import atexit
import errno
import json
import logging
import os
import pickle
import queue
import select
import shutil
import socket as _socket
import sys
import threading
import time

from . import _api, _paths, _torch

log = logging.getLogger("vramscope")
log.addHandler(logging.NullHandler())  # no "lastResort" output: the agent decides what reaches stderr
if os.environ.get("VRAMSCOPE_DEBUG"):
    _h = logging.StreamHandler(sys.stderr)
    _h.setFormatter(logging.Formatter("vramscope[%(process)d] %(levelname)s %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.DEBUG)

# JSON-RPC error codes (daemon/api/api.go).
CODE_PARSE = -32700
CODE_METHOD_NOT_FOUND = -32601
CODE_INVALID_PARAMS = -32602
CODE_VERSION = -32002
CODE_AGENT_FAILED = -32006

QUEUE_MAX = 256  # outgoing notifications waiting for the socket; more are dropped
CONNECT_TIMEOUT = 2.0
SEND_TIMEOUT = 5.0
REQUEST_TIMEOUT = 5.0  # hello, register
CAPTURED_TIMEOUT = 120.0  # the daemon validates and stores the file before it answers
BACKOFF_MIN = 0.5
BACKOFF_MAX = 5.0
COUNTERS_EVERY = 1.0
POLL = 0.2
OOM_MIN_INTERVAL = 10.0  # torch calls the observer again for each retry of one failing op
MAX_LINE = 64 << 20
_REFRESH_KEYS = ("torch", "cuda", "device", "recording", "note")
_CLOSED = object()  # a pending request's answer when the connection closed

_lock = threading.RLock()  # attach / detach
_agent = None
_said = set()
_process_hooks = []


class AgentError(Exception):
    """A failure the daemon gets as a JSON-RPC error."""

    def __init__(self, message, code=CODE_AGENT_FAILED):
        Exception.__init__(self, message)
        self.code = code


class RPCError(Exception):
    def __init__(self, error):
        error = error if isinstance(error, dict) else {}
        Exception.__init__(self, "%s (code %s)" % (error.get("message", "error"), error.get("code")))
        self.code = error.get("code")


class _Disconnected(Exception):
    pass


def _say(key, message):
    """One line on stderr, once per process and key."""
    if key in _said:
        return
    _said.add(key)
    try:
        sys.stderr.write("vramscope: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass


def _env_int(name, default):
    try:
        return int(os.environ.get(name, "").strip() or default)
    except ValueError:
        return default


def _env_off(name):
    return os.environ.get(name, "").strip().lower() in ("0", "false", "no", "off")


def _env_rank(name):
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        return int(v)
    except ValueError:
        return None


class _FileSnapshot:
    """The VRAMSCOPE_TEST_SNAPSHOT test hook: copy this file instead of pickling torch's snapshot."""

    def __init__(self, path):
        self.path = path


def _take_snapshot():
    """torch.cuda.memory._snapshot(), or the test hook's file."""
    test = os.environ.get("VRAMSCOPE_TEST_SNAPSHOT")
    if test:
        return _FileSnapshot(test)
    torch = _torch.imported()
    if torch is None:
        raise AgentError("torch is not imported in this process: there is no allocator snapshot to take")
    if not _torch.cuda_initialized(torch):
        raise AgentError("CUDA is not initialised in this process: there is no allocator snapshot to take")
    return torch.cuda.memory._snapshot()


def _entries(snap):
    try:
        return sum(len(t) for t in snap.get("device_traces") or ())
    except Exception:
        return -1


def _allocated_from_segments(snap, device):
    try:
        return sum(int(s.get("allocated_size", 0)) for s in snap.get("segments") or ()
                   if s.get("device", device) == device)
    except Exception:
        return -1


def _write_snapshot(path, snap):
    """Write a snapshot to path (pickle protocol 4, or the test file's bytes), flush
    and fsync. Returns (bytes, entries). Removes the file on failure."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(snap, _FileSnapshot):
                with open(snap.path, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 20)
                entries = -1
            elif isinstance(snap, (bytes, bytearray)):
                f.write(snap)
                entries = -1
            else:
                pickle.dump(snap, f, protocol=4)
                entries = _entries(snap)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    return size, entries


def _move(src, dst):
    """os.replace, or copy + fsync + unlink across file systems."""
    try:
        os.replace(src, dst)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    with open(src, "rb") as s, open(dst, "wb") as d:
        shutil.copyfileobj(s, d, 1 << 20)
        d.flush()
        os.fsync(d.fileno())
    os.unlink(src)


class Agent:
    def __init__(self, opts, auto):
        self.opts = opts
        self.auto = auto
        self.socket_path = opts.get("socket") or _paths.socket_path()
        self.pid = os.getpid()
        self.stop = threading.Event()
        self.lock = threading.Lock()  # state below
        self.wlock = threading.Lock()  # writes to the socket
        self.thread = None
        self.worker = None
        self.jobs = queue.Queue()
        self.notes = queue.Queue(maxsize=QUEUE_MAX)
        self.dropped = 0
        self.sock = None
        self.poller = None
        self.gen = 0
        self.connected = False
        self.registered = False
        self.registrations = 0
        self.incoming_dir = None
        self.next_id = 0
        self.pending = {}
        self.buf = b""
        self.last_error = None
        self.facts_sent = None
        self.import_hook = None
        self.torch_installed = None
        self.recording = "off"  # off | pending | on | failed
        self.recording_error = None
        self.annotations = False
        self.started_recording = False
        self.cuda_hook = None  # "now" | "queued" | None
        self.init_device = None
        self.no_cuda = False
        self.oom_hooked = False
        self.captures_pending = 0
        self.captures = 0
        self.last_oom = None

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
        with self.lock:
            if self.thread is not None or self.stop.is_set():
                return
            self.thread = threading.Thread(target=self._run, name="vramscope-agent", daemon=True)
        self.thread.start()

    def shutdown(self, wait=2.0):
        self.stop.set()
        if self.import_hook is not None:
            from . import _importhook

            _importhook.uninstall(self.import_hook)
        self._close_socket()
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(wait)
        self.jobs.put(None)
        torch = _torch.imported()
        _torch.unwrap_backward()
        if torch is not None and self.started_recording and _torch.cuda_initialized(torch):
            _torch.stop_recording(torch)
            self.started_recording = False

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
            self.recording = "pending"
        # (auto mode registers only once CUDA is up: no need to ask, nor to load NVML in
        # every process that imports torch)
        if not self.auto and _torch.cuda_unavailable(torch):
            self.no_cuda = True
            log.warning("vramscope: CUDA is not available: counters only")
            if not self.auto:
                _say("no-cuda", "CUDA is not available: registering for counters only (no allocator recording)")
        self.cuda_hook = _torch.on_cuda_init(torch, self._cuda_init)
        if self.cuda_hook is None:
            if self.recording == "pending":
                self.recording = "failed"
                self.recording_error = "cannot hook CUDA initialisation (torch.cuda._lazy_call failed)"
            log.warning("vramscope: %s", self.recording_error or "cannot hook CUDA initialisation")

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
            if self.opts["record"]:
                try:
                    self.annotations = _torch.start_recording(torch, self.opts["max_entries"], self.opts["stacks"])
                    self.recording = "on"
                    self.started_recording = True
                    log.info("vramscope: recording the allocator's history (max_entries=%d, stacks=%s)",
                             self.opts["max_entries"], self.opts["stacks"])
                except Exception as e:
                    self.recording = "failed"
                    self.recording_error = "recording could not start: %s" % (e,)
                    log.warning("vramscope: %s", self.recording_error, exc_info=True)
                    _say("record-failed", self.recording_error)
            if self.opts["oom"]:
                try:
                    self.oom_hooked = _torch.attach_oom_observer(torch, _oom_observer)
                except Exception:
                    log.warning("vramscope: could not attach the out-of-memory observer", exc_info=True)
            if self.auto:
                self.start_thread()
        except Exception:
            log.warning("vramscope: CUDA-init hook failed", exc_info=True)

    def device(self):
        """The CUDA device this process uses, as reported: LOCAL_RANK (torchrun),
        else the current device when CUDA initialised, else -1."""
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
        if self.recording == "failed":
            return self.recording_error or "recording could not start"
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
            "recording": self.recording == "on" or (self.recording == "pending" and not self.no_cuda),
            "max_entries": self.opts["max_entries"],
            "api_version": _api.API_VERSION,
        }
        if tv:
            f["torch"] = tv
        if cv:
            f["cuda"] = cv
        n = self.note()
        if n:
            f["note"] = n
        return f

    # --- the agent thread ---------------------------------------------------------

    def _run(self):
        backoff = BACKOFF_MIN
        while not self.stop.is_set():
            wait = None
            try:
                self._connect()
                self._register()
                backoff = BACKOFF_MIN
                self._serve()
            except _Disconnected as e:
                self._error(str(e), quiet=True)
            except (OSError, ValueError) as e:
                self._error("%s: %s" % (type(e).__name__, e), quiet=True)
                if not self.registrations and not self.stop.is_set():
                    _say("no-daemon", "no vramscope daemon at %s (start it with `vramscope serve`); "
                                      "the program runs on and the agent keeps retrying" % self.socket_path)
            except RPCError as e:
                self._error("daemon refused: %s" % e)
                if e.code == CODE_VERSION:
                    _say("version", "the daemon refused this agent's API version %s: %s" % (_api.API_VERSION, e))
                    wait = 60.0
            except Exception as e:  # a bug: never let it out, keep going
                self._error("%s: %s" % (type(e).__name__, e))
                log.warning("vramscope: agent error", exc_info=True)
            finally:
                self._close_socket()
            if self.stop.wait(wait or backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _error(self, message, quiet=False):
        self.last_error = message
        (log.debug if quiet else log.warning)("vramscope: %s", message)

    def _connect(self):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(CONNECT_TIMEOUT)
            s.connect(self.socket_path)
            s.settimeout(SEND_TIMEOUT)
        except BaseException:
            s.close()
            raise
        poller = None
        if hasattr(select, "poll"):  # select() fails on descriptors >= 1024, common in training jobs
            poller = select.poll()
            poller.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
        with self.lock:
            if self.stop.is_set():
                s.close()
                raise _Disconnected("stopped")
            self.poller = poller
            self.sock = s
            self.gen += 1
            self.buf = b""
            self.connected = True
        log.debug("vramscope: connected to %s", self.socket_path)

    def _register(self):
        try:
            hello = self.request(_api.HELLO, {"client": "agent", "api_version": _api.API_VERSION}, REQUEST_TIMEOUT)
            theirs = str((hello or {}).get("api_version") or "")
            if theirs and theirs.split(".")[0] != _api.API_VERSION.split(".")[0]:
                raise RPCError({"code": CODE_VERSION, "message": "daemon speaks API %s" % theirs})
        except RPCError as e:
            if e.code == CODE_VERSION:
                raise
            # daemon.hello is optional on the Unix socket
        facts = self.facts()
        res = self.request(_api.AGENT_REGISTER, facts, REQUEST_TIMEOUT) or {}
        incoming = res.get("incoming_dir")
        if not isinstance(incoming, str) or not incoming:
            raise RPCError({"code": CODE_INVALID_PARAMS, "message": "agent.register gave no incoming_dir"})
        with self.lock:
            self.incoming_dir = incoming
            self.registered = True
            self.registrations += 1
            self.facts_sent = facts
        self.last_error = None
        log.info("vramscope: registered with the daemon at %s (pid %d, registration %d)",
                 self.socket_path, self.pid, self.registrations)
        self.submit(("handover",))

    def _serve(self):
        last_counters = 0.0
        while not self.stop.is_set():
            self._read(POLL)
            self._drain()
            now = time.monotonic()
            if now - last_counters >= COUNTERS_EVERY:
                last_counters = now
                self._counters()
                self._refresh()

    def _refresh(self):
        """Re-register when what the daemon knows changed (torch imported, CUDA up, recording)."""
        facts = self.facts()
        if all(facts.get(k) == (self.facts_sent or {}).get(k) for k in _REFRESH_KEYS):
            return
        try:
            self.request(_api.AGENT_REGISTER, facts, REQUEST_TIMEOUT)
            self.facts_sent = facts
        except RPCError:
            # a daemon that takes one registration per connection: start a new one
            raise _Disconnected("re-registering")

    def _counters(self):
        torch = _torch.imported()
        if torch is None or not _torch.cuda_initialized(torch):
            return
        try:
            idx = _torch.torch_index(torch, _env_rank("LOCAL_RANK"), self.init_device)
            if idx is None:
                return
            a, r, m = _torch.counters(torch, idx)
        except Exception:
            log.debug("torch counters failed", exc_info=True)
            return
        self.notify(_api.AGENT_TORCH, {"time_ms": int(time.time() * 1000), "device": self.device(),
                                       "allocated": a, "reserved": r, "max_allocated": m})

    def notify(self, method, params):
        """Queue a notification; never blocks: drops (and counts) when the queue is full."""
        try:
            self.notes.put_nowait((method, params))
        except queue.Full:
            self.dropped += 1

    def _drain(self):
        for _ in range(QUEUE_MAX):
            try:
                method, params = self.notes.get_nowait()
            except queue.Empty:
                return
            self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # --- socket -------------------------------------------------------------------

    def _send(self, msg, gen=None):
        data = json.dumps(msg, separators=(",", ":")).encode("ascii") + b"\n"
        with self.wlock:
            s = self.sock
            if s is None or (gen is not None and gen != self.gen):
                raise _Disconnected("not connected")
            try:
                s.sendall(data)
            except (OSError, ValueError) as e:
                self._break(s)
                raise _Disconnected("send failed: %s" % e)

    def _break(self, s):
        try:
            s.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass

    def _close_socket(self):
        with self.lock:
            s, self.sock = self.sock, None
            self.connected = False
            self.registered = False
            pending, self.pending = self.pending, {}
        for slot in pending.values():
            slot[1] = _CLOSED
            slot[0].set()
        if s is not None:
            self._break(s)
            try:
                s.close()
            except OSError:
                pass

    def _read(self, timeout):
        s = self.sock
        if s is None:
            raise _Disconnected("not connected")
        try:
            if self.poller is not None:
                ready = self.poller.poll(int(timeout * 1000))
            else:
                ready = select.select([s], [], [], timeout)[0]
        except (OSError, ValueError) as e:
            raise _Disconnected("poll: %s" % e)
        if not ready:
            return
        try:
            data = s.recv(1 << 16)
        except _socket.timeout:
            return
        except (OSError, ValueError) as e:
            raise _Disconnected("recv: %s" % e)
        if not data:
            raise _Disconnected("the daemon closed the connection")
        self.buf += data
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                break
            line, self.buf = self.buf[:i], self.buf[i + 1:]
            if line.strip():
                self._dispatch(line)
        if len(self.buf) > MAX_LINE:
            raise _Disconnected("message too long")

    def _dispatch(self, line):
        try:
            msg = json.loads(line.decode("utf-8"))
        except ValueError:
            log.debug("vramscope: bad JSON from the daemon: %r", line[:200])
            try:
                self._send({"jsonrpc": "2.0", "id": None, "error": {"code": CODE_PARSE, "message": "parse error"}})
            except _Disconnected:
                pass
            return
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        if method is not None:
            if msg.get("id") is None:
                return  # a notification from the daemon: nothing to do
            self._on_request(msg)
            return
        rid = msg.get("id")
        with self.lock:
            slot = self.pending.pop(rid, None) if isinstance(rid, int) else None
        if slot is not None:
            slot[1] = msg
            slot[0].set()

    def _on_request(self, msg):
        rid, method = msg.get("id"), msg.get("method")
        if method == _api.AGENT_DUMP:
            self.submit(("dump", self.gen, rid, msg.get("params")))
            return
        self.respond(self.gen, rid, error=(CODE_METHOD_NOT_FOUND, "method not found: %s" % (method,)))

    def respond(self, gen, rid, result=None, error=None):
        if error is not None:
            msg = {"jsonrpc": "2.0", "id": rid, "error": {"code": error[0], "message": error[1]}}
        else:
            msg = {"jsonrpc": "2.0", "id": rid, "result": result}
        try:
            self._send(msg, gen=gen)
        except _Disconnected:
            log.debug("vramscope: response %r dropped: the connection it came on is gone", rid)

    def request(self, method, params, timeout):
        """A request to the daemon; returns its result or raises RPCError / _Disconnected.
        On the agent thread it reads the socket itself while it waits."""
        with self.lock:
            if self.sock is None:
                raise _Disconnected("not connected")
            self.next_id += 1
            rid = self.next_id
            slot = [threading.Event(), None]
            self.pending[rid] = slot
            gen = self.gen
        try:
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, gen=gen)
            deadline = time.monotonic() + timeout
            if threading.current_thread() is self.thread:
                while not slot[0].is_set():
                    left = deadline - time.monotonic()
                    if left <= 0 or self.stop.is_set():
                        break
                    self._read(min(left, POLL))
            else:
                slot[0].wait(timeout)
        finally:
            with self.lock:
                self.pending.pop(rid, None)
        msg = slot[1]
        if msg is None:
            raise _Disconnected("%s: no answer within %.0f s" % (method, timeout))
        if msg is _CLOSED:
            raise _Disconnected("%s: the connection closed" % method)
        if msg.get("error") is not None:
            raise RPCError(msg["error"])
        return msg.get("result")

    # --- the worker thread (dumps, captures, spool handover) ------------------------

    def submit(self, job):
        with self.lock:
            if self.worker is None:
                self.worker = threading.Thread(target=self._work, name="vramscope-worker", daemon=True)
                self.worker.start()
        self.jobs.put(job)

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
                        self.captures_pending -= 1

    def _check_dump_path(self, path):
        incoming = self.incoming_dir
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
            self.respond(gen, rid, error=(CODE_INVALID_PARAMS, "agent.dump refused: " + bad))
            return
        t0 = time.perf_counter()
        try:
            snap = _take_snapshot()
            size, entries = _write_snapshot(path, snap)
        except AgentError as e:
            self.respond(gen, rid, error=(e.code, "agent.dump failed: %s" % e))
            return
        except Exception as e:
            log.warning("vramscope: agent.dump failed", exc_info=True)
            self.respond(gen, rid, error=(CODE_AGENT_FAILED, "agent.dump failed: %s: %s" % (type(e).__name__, e)))
            return
        took = (time.perf_counter() - t0) * 1000.0
        self.respond(gen, rid, result={"path": path, "bytes": size, "entries": entries,
                                       "took_ms": round(took, 3), "device": self.device()})

    def on_oom(self, device, requested, device_total, device_free):
        """The OOM observer's work inside torch's callback: take the snapshot now,
        before the OutOfMemoryError unwinds; the worker writes and hands it over."""
        now = time.monotonic()
        with self.lock:
            if self.captures_pending or (self.last_oom is not None and now - self.last_oom < OOM_MIN_INTERVAL):
                log.debug("vramscope: repeated out-of-memory callback ignored")
                return
            self.last_oom = now
            self.captures_pending += 1
        queued = False
        try:
            t0 = time.perf_counter()
            snap = _take_snapshot()
            if isinstance(snap, _FileSnapshot):  # test hook: read it now, like torch's snapshot
                with open(snap.path, "rb") as f:
                    snap = f.read()
            took = (time.perf_counter() - t0) * 1000.0
            allocated = _allocated_from_segments(snap, device) if isinstance(snap, dict) else -1
            oom = {"device": int(device), "requested": int(requested), "device_free": int(device_free),
                   "device_allocated": int(allocated), "device_total": int(device_total)}
            self.submit(("capture", snap, oom, took))
            queued = True
        finally:
            if not queued:
                with self.lock:
                    self.captures_pending -= 1

    def _capture(self, snap, oom, took_ms):
        self.captures += 1
        name = "oom-%d-%d-%d" % (self.pid, int(time.time() * 1000), self.captures)
        device = oom["device"]
        incoming = self.incoming_dir if self.registered else None
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
            try:
                res = self.request(_api.AGENT_CAPTURED, params, CAPTURED_TIMEOUT) or {}
                _say("oom-%d" % self.captures, "out of memory on cuda:%d: snapshot handed to the daemon%s"
                     % (device, (" (%s)" % res["id"]) if isinstance(res, dict) and res.get("id") else ""))
                return
            except RPCError as e:
                _say("oom-%d" % self.captures, "out of memory on cuda:%d: the daemon refused the snapshot (%s)%s"
                     % (device, e, ("; it stays at %s" % path) if os.path.exists(path) else ""))
                return
            except _Disconnected:
                # the daemon went away: keep the file in the spool for the next connection
                try:
                    spooled = self._spool_file(name, path, params)
                    _say("oom-%d" % self.captures, "out of memory on cuda:%d: the daemon went away; snapshot "
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
        _say("oom-%d" % self.captures, "out of memory on cuda:%d; no daemon connected: snapshot saved to %s "
             "(handed to the daemon when it is back)" % (oom["device"], final))
        # a daemon may have come back while we wrote
        if self.registered:
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
            if not self.registered or self.stop.is_set():
                return
            side_path = os.path.join(d, n)
            pick = side_path[:-len(".json")] + ".pickle"
            try:
                with open(side_path) as f:
                    side = json.load(f)
                if side.get("pid") != self.pid or not os.path.exists(pick):
                    continue
                incoming = self.incoming_dir
                dst = os.path.join(incoming, os.path.basename(pick)[:-len(".pickle")] + ".part")
                _move(pick, dst)
            except Exception:
                log.warning("vramscope: could not hand over %s", pick, exc_info=True)
                continue
            params = dict(side.get("captured") or {}, path=dst)
            try:
                self.request(_api.AGENT_CAPTURED, params, CAPTURED_TIMEOUT)
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

    # --- status -------------------------------------------------------------------

    def status(self):
        return {
            "attached": not self.stop.is_set(),
            "mode": "auto" if self.auto else "attach",
            "pid": self.pid,
            "socket": self.socket_path,
            "connected": self.connected,
            "registered": self.registered,
            "registrations": self.registrations,
            "incoming_dir": self.incoming_dir,
            "recording": self.recording == "on",
            "recording_state": self.recording,
            "annotations": self.annotations,
            "oom_observer": self.oom_hooked,
            "note": self.note(),
            "dropped": self.dropped,
            "queued": self.notes.qsize(),
            "oom_captures": self.captures,
            "last_error": self.last_error,
        }


# --- module API ---------------------------------------------------------------------


def _oom_observer(device, alloc, device_total, device_free):
    """Registered with torch._C._cuda_attach_out_of_memory_observer. torch calls it
    as (device, bytes requested, device total or the memory-fraction limit, device
    free) before it raises OutOfMemoryError; it must not raise."""
    a = _agent
    if a is None or a.stop.is_set() or not a.opts.get("oom"):
        return
    try:
        a.on_oom(device, alloc, device_total, device_free)
    except Exception:
        log.warning("vramscope: out-of-memory capture failed", exc_info=True)


def _simulate_oom(device=0, requested=1 << 30, device_total=80 << 30, device_free=1 << 20):
    """Test hook: run the out-of-memory observer as torch would (use with VRAMSCOPE_TEST_SNAPSHOT)."""
    _oom_observer(device, requested, device_total, device_free)


def _notify(method, params):
    """Test hook / internal: queue a notification for the daemon (drops when full)."""
    a = _agent
    if a is not None:
        a.notify(method, params)


def attach(max_entries=100_000, stacks="python", record=True, socket=None, oom=True, annotate_backward=True,
           _auto=False):
    global _agent
    if stacks not in ("python", "all"):
        raise ValueError("stacks must be 'python' or 'all', not %r" % (stacks,))
    try:
        max_entries = int(max_entries)
    except (TypeError, ValueError):
        raise ValueError("max_entries must be a positive integer, not %r" % (max_entries,))
    if max_entries <= 0:
        raise ValueError("max_entries must be a positive integer, not %r" % (max_entries,))
    if _env_off("VRAMSCOPE_RECORD"):
        record = False
    opts = {"max_entries": max_entries, "stacks": stacks, "record": bool(record), "socket": socket,
            "oom": bool(oom), "annotate_backward": bool(annotate_backward)}
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
            a.last_error = "%s: %s" % (type(e).__name__, e)
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
    while a.captures_pending > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        a.stop.set()
        a._close_socket()
    except Exception:
        pass


def _after_fork_child():
    """A forked child is another process: it inherits no agent (it attaches its own, if any)."""
    global _agent, _lock
    _lock = threading.RLock()
    a, _agent = _agent, None
    if a is not None:
        a.stop.set()
        s = a.sock
        a.sock = None
        if s is not None:
            try:
                s.close()  # the child's copy of the descriptor only
            except OSError:
                pass


def _install_process_hooks():
    if _process_hooks:
        return
    _process_hooks.append(True)
    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_child)
