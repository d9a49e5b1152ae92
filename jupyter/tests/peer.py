"""A small in-test JSON-RPC peer standing in for the vramscope daemon.

It serves the daemon's Unix socket with line-delimited JSON-RPC 2.0
(daemon/api/api.go): answers daemon.hello, agent.register (with an
incoming_dir) and agent.captured, keeps agent.torch notifications, and can send
agent.dump requests to a connected agent and wait for the answer.

The tests reach it only through the interface below (conftest.py's `daemon`
fixture builds it), so another peer — the real Go daemon behind an adapter —
can be plugged in with VRAMSCOPE_TEST_PEER=module:factory, where
factory(socket_path, incoming_dir) returns an object with:

    socket, incoming_dir        paths
    start(), stop()             serve / stop serving (and remove the socket)
    wait_register(pid=None, count=1, timeout=10) -> RegisterParams dict
    dump(pid, path, timeout=10) -> the JSON-RPC response dict (result or error)
    wait_captured(pid=None, timeout=10) -> CapturedParams dict
    wait_torch(pid=None, timeout=10) -> TorchParams dict
    connections -> number of connections accepted so far

Tests that need more than that (a hung daemon, raw paths) are marked fake_only.
"""
import json
import os
import socket
import threading
import time

from vramscope import _api  # the method names, generated from daemon/api

HELLO = _api.HELLO
REGISTER = _api.AGENT_REGISTER
CAPTURED = _api.AGENT_CAPTURED
TORCH = _api.AGENT_TORCH
DUMP = _api.AGENT_DUMP


class Conn:
    def __init__(self, daemon, sock):
        self.daemon = daemon
        self.sock = sock
        self.pid = None
        self.next_id = 1000
        self.pending = {}
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def send(self, msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            self.sock.sendall(data)

    def _read(self):
        buf = b""
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self._handle(json.loads(line))
        except OSError:
            pass
        finally:
            self.closed.set()
            with self.daemon.cond:
                self.daemon.cond.notify_all()

    def _handle(self, msg):
        d = self.daemon
        with d.cond:
            d.messages.append((self, msg))
            d.cond.notify_all()
        if "method" not in msg:  # a response to our request
            slot = self.pending.get(msg.get("id"))
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            return
        method, params, rid = msg["method"], msg.get("params"), msg.get("id")
        if method == TORCH:
            with d.cond:
                d.torch.append((self.pid, params))
                d.cond.notify_all()
            return
        if rid is None:
            return
        if method == HELLO:
            self.send({"jsonrpc": "2.0", "id": rid, "result": {
                "version": "fake", "api_version": _api.API_VERSION, "pid": os.getpid(), "host": socket.gethostname()}})
        elif method == REGISTER:
            self.pid = params.get("pid")
            with d.cond:
                d.registrations.append(params)
                d.cond.notify_all()
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"incoming_dir": d.incoming_dir, "api_version": _api.API_VERSION}})
        elif method == CAPTURED:
            with d.cond:
                d.captured.append(params)
                d.cond.notify_all()
            if d.hang_captured:
                return  # a daemon that hangs while it stores the snapshot
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"id": "snap-%d" % len(d.captured),
                                                                "path": params.get("path")}})
        else:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})

    def request(self, method, params, timeout=10):
        self.next_id += 1
        rid = self.next_id
        slot = [threading.Event(), None]
        self.pending[rid] = slot
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not slot[0].wait(timeout):
            raise TimeoutError("no answer to %s within %s s" % (method, timeout))
        return slot[1]

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class FakeDaemon:
    def __init__(self, socket_path, incoming_dir, hang=False):
        self.socket = socket_path
        self.incoming_dir = incoming_dir
        self.hang = hang  # accept nothing, answer nothing (a hung daemon)
        self.hang_captured = False  # take agent.captured and never answer it
        self.cond = threading.Condition()
        self.conns = []
        self.messages = []
        self.registrations = []
        self.captured = []
        self.torch = []
        self.connections = 0
        self.listener = None
        os.makedirs(incoming_dir, exist_ok=True)

    def start(self):
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.socket)
        s.listen(16)
        self.listener = s
        if not self.hang:
            threading.Thread(target=self._accept, args=(s,), daemon=True).start()
        return self

    def _accept(self, s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            with self.cond:
                self.connections += 1
                self.conns.append(Conn(self, c))
                self.cond.notify_all()

    def stop(self):
        if self.listener is not None:
            try:
                self.listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.listener.close()
            self.listener = None
        for c in list(self.conns):
            c.close()
        self.conns = []
        try:
            os.unlink(self.socket)
        except OSError:
            pass

    def _wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred()
                if v is not None:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("peer: no %s within %s s" % (what, timeout))
                self.cond.wait(left)

    def wait_register(self, pid=None, count=1, timeout=10):
        def pred():
            regs = [r for r in self.registrations if pid is None or r.get("pid") == pid]
            return regs[count - 1] if len(regs) >= count else None

        return self._wait(pred, timeout, "agent.register")

    def wait_captured(self, pid=None, timeout=10):
        return self._wait(lambda: next((c for c in self.captured if pid is None or c.get("pid", pid) == pid), None),
                          timeout, "agent.captured")

    def wait_torch(self, pid=None, timeout=10):
        return self._wait(lambda: next((p for q, p in self.torch if pid is None or q == pid), None),
                          timeout, "agent.torch")

    def conn_of(self, pid, timeout=10):
        return self._wait(lambda: next((c for c in reversed(self.conns) if c.pid == pid and not c.closed.is_set()),
                                       None), timeout, "connection of pid %s" % pid)

    def dump(self, pid, path, timeout=10):
        return self.conn_of(pid).request(DUMP, {"path": path}, timeout)
