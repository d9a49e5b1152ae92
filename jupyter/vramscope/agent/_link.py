"""The agent's connection to the daemon: connect with backoff, register, read
and dispatch line-delimited JSON-RPC, answer requests, send notifications
through the bounded queue. It runs on its own thread (vramscope-agent)."""
import json
import queue
import select
import socket as _socket
import threading
import time

from .. import _api
from ._levels import LEVELS_EVERY, SEND_MAX
from ._common import (
    BACKOFF_MAX,
    BACKOFF_MIN,
    CODE_INVALID_PARAMS,
    CODE_METHOD_NOT_FOUND,
    CODE_PARSE,
    CODE_VERSION,
    CONNECT_TIMEOUT,
    COUNTERS_EVERY,
    MAX_LINE,
    POLL,
    QUEUE_MAX,
    REQUEST_TIMEOUT,
    RPCError,
    SEND_TIMEOUT,
    _CLOSED,
    _Disconnected,
    _REFRESH_KEYS,
    _say,
    log,
)


class Link:
    """The connection and its state, under its own lock. What it needs of the
    agent comes as callables: facts() (RegisterParams), counters() (the
    agent.torch params or None), levels(n) (LevelsParams of steps not sent yet,
    or None), on_registered() after each registration and on_dump(gen, rid,
    params) for the daemon's agent.dump; each runs on this link's thread."""

    def __init__(self, socket_path, stop, facts, counters, levels, on_registered, on_dump):
        self.socket_path = socket_path
        self.stop = stop  # the agent's: set once, when it detaches
        self._facts = facts
        self._counters = counters
        self._levels = levels
        self._on_registered = on_registered
        self._on_dump = on_dump
        self.lock = threading.Lock()  # the connection state below
        self.wlock = threading.Lock()  # writes to the socket
        # Steps drained from the levels go out in the order they were drained:
        # agent.levels notifications are queued, a snapshot's message carries
        # the rest; held from a drain until its message is queued, and from a
        # queued notification's dequeue until it is sent (_send_carrying).
        self.olock = threading.Lock()
        self.thread = None
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

    def start(self):
        """Starts the link's thread; False when it runs already or the agent has stopped."""
        with self.lock:
            if self.thread is not None or self.stop.is_set():
                return False
            self.thread = threading.Thread(target=self._run, name="vramscope-agent", daemon=True)
        self.thread.start()
        return True

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
                self.error(str(e), quiet=True)
            except (OSError, ValueError) as e:
                self.error("%s: %s" % (type(e).__name__, e), quiet=True)
                if not self.registrations and not self.stop.is_set():
                    _say("no-daemon", "no vramscope daemon at %s (start it with `vramscope serve`); "
                                      "the program runs on and the agent keeps retrying" % self.socket_path)
            except RPCError as e:
                self.error("daemon refused: %s" % e)
                if e.code == CODE_VERSION:
                    _say("version", "the daemon refused this agent's API version %s: %s" % (_api.API_VERSION, e))
                    wait = 60.0
            except Exception as e:  # a bug: never let it out, keep going
                self.error("%s: %s" % (type(e).__name__, e))
                log.warning("vramscope: agent error", exc_info=True)
            finally:
                self.close()
            if self.stop.wait(wait or backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX)

    def error(self, message, quiet=False):
        """Keep message as the last error (status' last_error) and log it."""
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
            self.buf = bytearray()
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
        facts = self._facts()
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
                 self.socket_path, facts.get("pid", 0), self.registrations)
        self._on_registered()

    def _serve(self):
        last_counters = last_levels = 0.0
        while not self.stop.is_set():
            self._read(POLL)
            self._drain()
            now = time.monotonic()
            if now - last_counters >= COUNTERS_EVERY:
                last_counters = now
                self._send_counters()
                self._refresh()
            if now - last_levels >= LEVELS_EVERY:
                last_levels = now
                self._send_levels()

    def _send_levels(self):
        """agent.levels: the steps measured since the last one (a queue that is
        full drops them for the daemon; the ring keeps them for snapshots)."""
        with self.olock:
            for _ in range(8):
                p = self._levels(SEND_MAX)
                if p is None:
                    return
                self.notify(_api.AGENT_LEVELS, p)
                if len(p["levels"]) < SEND_MAX:
                    return

    def _refresh(self):
        """Re-register when what the daemon knows changed (torch imported, CUDA up, recording)."""
        facts = self._facts()
        if all(facts.get(k) == (self.facts_sent or {}).get(k) for k in _REFRESH_KEYS):
            return
        try:
            self.request(_api.AGENT_REGISTER, facts, REQUEST_TIMEOUT)
            self.facts_sent = facts
        except RPCError:
            # a daemon that takes one registration per connection: start a new one
            raise _Disconnected("re-registering") from None

    def _send_counters(self):
        p = self._counters()
        if p is not None:
            self.notify(_api.AGENT_TORCH, p)

    def notify(self, method, params):
        """Queue a notification; never blocks: drops (and counts) when the queue is full."""
        try:
            self.notes.put_nowait((method, params))
        except queue.Full:
            self.dropped += 1

    def flush(self):
        """Send the steps not sent yet and every queued notification now, from
        the calling thread (a detach, the interpreter's exit: the link's thread
        drains at most every POLL seconds and may not wake again). Never raises;
        nothing is sent when not connected."""
        if not self.connected:
            return
        try:
            self._send_levels()
            self._drain()
        except Exception:
            log.debug("vramscope: flush at the end failed", exc_info=True)

    def _drain(self):
        with self.olock:
            self._drain_ordered()

    def _drain_ordered(self):
        """The queued notifications, sent; under olock."""
        for _ in range(QUEUE_MAX):
            try:
                method, params = self.notes.get_nowait()
            except queue.Empty:
                return
            self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _send_carrying(self, msg, into, gen=None):
        """Send msg after the notifications queued before it, with the steps
        no agent.levels carried in into["levels"] (a snapshot's request or
        answer: the daemon stores the steps it knows beside the snapshot when
        it takes it, so none may come after it)."""
        with self.olock:
            p = self._levels(SEND_MAX)
            if p is not None:
                into["levels"] = p
            self._drain_ordered()
            self._send(msg, gen=gen)

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
                raise _Disconnected("send failed: %s" % e) from e

    def _break(self, s):
        try:
            s.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self):
        """Close the connection (the thread reconnects unless the agent stopped);
        requests waiting for an answer get none."""
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
            raise _Disconnected("poll: %s" % e) from e
        if not ready:
            return
        try:
            data = s.recv(1 << 16)
        except _socket.timeout:
            return
        except (OSError, ValueError) as e:
            raise _Disconnected("recv: %s" % e) from e
        if not data:
            raise _Disconnected("the daemon closed the connection")
        # Look for newlines in the new bytes only and cut the buffer once per
        # read: a long line costs its length, not its length squared (an 80 MB
        # line from a broken daemon used to halve the training loop's speed).
        buf = self.buf
        scan = len(buf)
        buf += data
        pos = 0
        while self.buf is buf:  # a reconnect from _dispatch starts a new buffer
            i = buf.find(b"\n", scan)
            if i < 0:
                break
            line = bytes(buf[pos:i])
            pos = scan = i + 1
            if line.strip():
                self._dispatch(line)
        if pos and self.buf is buf:
            del buf[:pos]
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
            self._on_dump(self.gen, rid, msg.get("params"))
            return
        self.respond(self.gen, rid, error=(CODE_METHOD_NOT_FOUND, "method not found: %s" % (method,)))

    def respond(self, gen, rid, result=None, error=None, levels=False):
        """Answer a daemon's request; levels: a result that carries the steps
        not sent yet (_send_carrying)."""
        if error is not None:
            msg = {"jsonrpc": "2.0", "id": rid, "error": {"code": error[0], "message": error[1]}}
        else:
            msg = {"jsonrpc": "2.0", "id": rid, "result": result}
        try:
            if levels and error is None and isinstance(result, dict):
                self._send_carrying(msg, result, gen=gen)
            else:
                self._send(msg, gen=gen)
        except _Disconnected:
            log.debug("vramscope: response %r dropped: the connection it came on is gone", rid)

    def request(self, method, params, timeout, levels=False):
        """A request to the daemon; returns its result or raises RPCError / _Disconnected.
        On the agent thread it reads the socket itself while it waits.
        levels: params (a dict) carry the steps not sent yet (_send_carrying)."""
        with self.lock:
            if self.sock is None:
                raise _Disconnected("not connected")
            self.next_id += 1
            rid = self.next_id
            slot = [threading.Event(), None]
            self.pending[rid] = slot
            gen = self.gen
        try:
            msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            if levels:
                self._send_carrying(msg, params, gen=gen)
            else:
                self._send(msg, gen=gen)
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

    def queued(self):
        """Notifications waiting for the socket."""
        return self.notes.qsize()

    def forget_after_fork(self):
        """In a forked child: close the child's copy of the socket only, and stop."""
        self.stop.set()
        s, self.sock = self.sock, None
        if s is not None:
            try:
                s.close()
            except OSError:
                pass
