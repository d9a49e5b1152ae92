"""What every part of the agent shares: its logger, the wire's error codes and
timeouts, the exceptions, and the one-line stderr notices."""
import logging
import os
import sys

# The wire's error codes, generated from daemon/api/api.go; the agent's modules
# import them from here.
from .._api import (  # noqa: F401
    CODE_AGENT_FAILED,
    CODE_INVALID_PARAMS,
    CODE_METHOD_NOT_FOUND,
    CODE_PARSE,
    CODE_VERSION,
    MAX_MESSAGE_BYTES,
)


log = logging.getLogger("vramscope")
log.addHandler(logging.NullHandler())  # no "lastResort" output: the agent decides what reaches stderr
if os.environ.get("VRAMSCOPE_DEBUG"):
    _h = logging.StreamHandler(sys.stderr)
    _h.setFormatter(logging.Formatter("vramscope[%(process)d] %(levelname)s %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.DEBUG)


QUEUE_MAX = 256  # outgoing notifications waiting for the socket; more are dropped
CONNECT_TIMEOUT = 2.0
SEND_TIMEOUT = 5.0
REQUEST_TIMEOUT = 5.0  # hello, register
CAPTURED_TIMEOUT = 120.0  # the daemon validates and stores the file before it answers
BACKOFF_MIN = 0.5
BACKOFF_MAX = 5.0
COUNTERS_EVERY = 1.0
# How long the link's thread waits on the socket at a time: it wakes for the daemon's messages
# (and the socket's close at a detach) at once, and drains the queued notifications at least this
# often. Each wake costs the process ~0.1-0.3 ms of CPU on the H200 host (docs/inference.md): 1 s, not
# the 0.2 s it was, makes the thread's share ~5x smaller; a notification waits up to 1 s.
POLL = 1.0
OOM_MIN_INTERVAL = 10.0  # torch calls the observer again for each retry of one failing op
MAX_LINE = MAX_MESSAGE_BYTES  # one message from the daemon (requests and answers are small)
MAX_DUMPS_QUEUED = 4  # agent.dump requests waiting for the worker; more are refused at once
_REFRESH_KEYS = ("torch", "cuda", "device", "device_uuid", "recording", "note")
_CLOSED = object()  # a pending request's answer when the connection closed

_said = set()  # keys _say has printed


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


