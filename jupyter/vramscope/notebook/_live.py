"""`%vramscope live`: samples about once a second of the GPU's memory and
utilisation and of torch's allocated/reserved bytes, and the daemon's
forecast of when this process runs out (process.list's `forecast`, from its
per-step levels: docs/oom-warning.md).

GPU counters come from the daemon (`vramscope serve`, NVML) through
counters.series (the last minute, once) and counters.devices (then each tick),
found on the socket the agent uses (_paths.socket_path). torch's counters are
read in this process. Either may be missing; without both there is nothing to
show and probe() says why.
"""
import json
import os
import socket as _socket
import time

from .. import _api, _paths
from ..agent import _torch


class RPCError(Exception):
    pass


class DaemonClient:
    """A blocking JSON-RPC 2.0 client on the daemon's Unix socket (one line per message)."""

    def __init__(self, path=None, timeout=2.0):
        self.path = path or _paths.socket_path()
        self.timeout = timeout
        self.sock = None
        self.buf = b""
        self.next_id = 1

    def _connect(self):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
        except OSError:
            s.close()
            raise
        self.sock, self.buf = s, b""
        self.call(_api.HELLO, {"client": "jupyter", "api_version": _api.API_VERSION})

    def call(self, method, params=None):
        if self.sock is None:
            self._connect()
        mid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": mid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            self.sock.sendall((json.dumps(msg) + "\n").encode())
            deadline = time.monotonic() + self.timeout
            while True:
                while b"\n" not in self.buf:
                    if time.monotonic() > deadline:
                        raise OSError("timed out waiting for %s" % method)
                    data = self.sock.recv(1 << 16)
                    if not data:
                        raise OSError("the daemon closed the connection")
                    self.buf += data
                line, self.buf = self.buf.split(b"\n", 1)
                reply = json.loads(line)
                if reply.get("id") != mid:
                    continue  # a notification or a stale answer
                if reply.get("error"):
                    raise RPCError(reply["error"].get("message") or str(reply["error"]))
                return reply.get("result")
        except (OSError, ValueError):
            self.close()
            raise

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None


def _torch_cuda():
    """torch when this kernel imported it and CUDA may be used, else (None, why)."""
    torch = _torch.imported()
    if torch is None:
        return None, ("torch is not installed" if not _torch.installed() else "torch is not imported")
    if _torch.cuda_unavailable(torch):
        return None, "CUDA is not available"
    return torch, ""


class Sampler:
    """One point per sample(): {t, used, total, util, allocated, reserved} (None where unknown);
    idle(): why this kernel's GPU idled over the last minute, one line."""

    keep = 300  # points kept in the widget (5 minutes at 1 Hz)
    IDLE_EVERY = 5  # samples between two idle reports (and two OOM forecasts)

    def __init__(self, interval=1.0, device=None, socket=None, client=None):
        self.interval = max(0.1, float(interval))
        self.device = device
        self.client = client or DaemonClient(socket)
        self.daemon = False  # the daemon answers and has GPU counters
        self.daemon_note = ""
        self.torch = None
        self.torch_note = ""
        self.pid = os.getpid()  # whose forecast warning() reads

    def probe(self):
        """Finds the sources. Returns (source text, note); the source text is
        empty when there is nothing to sample (the note says why)."""
        self.torch, self.torch_note = _torch_cuda()
        if self.device is None:
            self.device = 0
            if self.torch is not None and _torch.cuda_initialized(self.torch):
                try:
                    self.device = int(self.torch.cuda.current_device())
                except Exception:
                    pass
        try:
            res = self.client.call(_api.COUNTERS_DEVICES)
            st = (res or {}).get("status") or {}
            self.daemon = bool(st.get("available"))
            self.daemon_note = "" if self.daemon else "the daemon has no GPU counters (%s)" % (
                st.get("reason") or "unavailable")
        except (OSError, RPCError, ValueError) as e:
            self.daemon = False
            self.daemon_note = "no daemon at %s (%s; start one with `vramscope serve`)" % (self.client.path, e)
        parts = []
        if self.daemon:
            parts.append("GPU %d counters from the daemon" % self.device)
        if self.torch is not None:
            parts.append("torch counters of this kernel")
        notes = [n for n in (self.daemon_note, "" if self.torch is not None else "no torch CUDA in this kernel (%s)"
                             % self.torch_note) if n]
        return " + ".join(parts), "; ".join(notes)

    def history(self):
        """The daemon's last minute of the device, when it has one."""
        if not self.daemon:
            return []
        now = int(time.time() * 1000)
        try:
            res = self.client.call(_api.COUNTERS_SERIES, {"device": self.device, "from_ms": now - 60_000,
                                                          "max_points": 120})
        except (OSError, RPCError, ValueError):
            return []
        return [self._point(s) for s in (res or {}).get("samples") or []]

    @staticmethod
    def _point(s, t=None):
        return {"t": int(s.get("time_ms") or t or time.time() * 1000), "used": s.get("mem_used_bytes"),
                "total": s.get("mem_total_bytes"), "util": s.get("util_gpu_pct"), "allocated": None, "reserved": None}

    def sample(self):
        now = int(time.time() * 1000)
        p = {"t": now, "used": None, "total": None, "util": None, "allocated": None, "reserved": None}
        if self.daemon:
            try:
                res = self.client.call(_api.COUNTERS_DEVICES)
                for s in (res or {}).get("latest") or []:
                    if s.get("device") == self.device:
                        p.update({k: v for k, v in self._point(s, now).items() if k != "t" and v is not None})
            except (OSError, RPCError, ValueError):
                pass
        t = self.torch
        if t is not None and _torch.cuda_initialized(t):
            try:
                p["allocated"] = int(t.cuda.memory_allocated(self.device))
                p["reserved"] = int(t.cuda.memory_reserved(self.device))
                if p["used"] is None and hasattr(t.cuda, "mem_get_info"):
                    free, total = t.cuda.mem_get_info(self.device)
                    p["used"], p["total"] = int(total - free), int(total)
            except Exception:
                pass
        if all(p[k] is None for k in ("used", "util", "allocated", "reserved")):
            return None
        return p

    def idle(self, pid=None):
        """The daemon's idle report of this process (the agent's stack samples
        joined with NVML): its headline and top lines, or "" when the GPU was
        busy or there is no report."""
        if not self.daemon:
            return ""
        try:
            r = self.client.call(_api.IDLE_REPORT, {"pid": pid or os.getpid()}) or {}
        except (OSError, RPCError, ValueError):
            return ""
        return idle_text(r)

    def warning(self):
        """The daemon's forecast for this process in words ("" when its memory
        does not grow, or there is no daemon)."""
        if not self.daemon:
            return ""
        try:
            res = self.client.call(_api.PROCESS_LIST)
        except (OSError, RPCError, ValueError):
            return ""
        for p in (res or {}).get("processes") or []:
            if p.get("pid") == self.pid:
                return warning_text(p.get("forecast"))
        return ""

    def close(self):
        self.client.close()


def _duration(seconds):
    s = int(seconds)
    if s >= 3600:
        return "%dh%02dm" % (s // 3600, s % 3600 // 60)
    if s >= 60:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%ds" % s


def warning_text(f):
    """One line for a process.list forecast: when this process is projected
    to run out, how fast its step peaks grow, toward what; "" for none."""
    if not f:
        return ""
    from ._report import fmt_bytes

    if f.get("bytes_per_second"):  # the levels carry times
        when = "in %s (step %d)" % (_duration(f.get("eta_seconds") or 0), f.get("projected_step", 0))
    else:
        when = "in %d steps (step %d)" % (f.get("steps_left", 0), f.get("projected_step", 0))
    rate = "%s/step" % fmt_bytes(f.get("bytes_per_step") or 0)
    if f.get("bytes_per_second"):
        rate += ", %s/s" % fmt_bytes(f["bytes_per_second"])
    text = "out of memory %s: memory grows %s toward %s" % (when, rate, fmt_bytes(f.get("capacity") or 0))
    if f.get("warned"):
        text += "; the daemon warned and took a snapshot (vramscope snapshots)"
    return text


def socket_exists(path=None):
    return os.path.exists(path or _paths.socket_path())


def idle_text(r):
    """An idle report (idle.report's result) in one line: the headline, the
    lines the training thread was on and the fix; "" without a finding."""
    if not r.get("headline"):
        return ""
    c = (r.get("causes") or [{}])[0]
    lines = ", ".join("%s:%d %.0f%%" % (os.path.basename(x.get("file", "")), x.get("line", 0), 100 * x.get("share", 0))
                      for x in (c.get("lines") or [])[:3])
    text = r["headline"]
    if lines:
        text += " \u2014 idle on " + lines
    if c.get("fix"):
        text += ". Fix: " + c["fix"]
    return text
