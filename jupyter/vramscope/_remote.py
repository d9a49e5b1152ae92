"""`python -m vramscope attach PID`: attach the agent to a running Python process.

Only possible with sys.remote_exec (PEP 768, Python 3.14+), when this interpreter
and the target run the same Python 3.14+ and the kernel lets us trace the target
(same user; kernel.yama.ptrace_scope 0, or 1 with CAP_SYS_PTRACE). Otherwise it
exits 2 with one message that names the alternatives.
"""
import os
import re
import sys
import time

from . import _paths
from ._cli import ALTERNATIVES

_VERSION = re.compile(r"(?:python|libpython)(\d+)\.(\d+)")


def target_python(pid):
    """(major, minor) of the Python running pid, from /proc/PID/exe's name or a
    libpython3.X in /proc/PID/maps; None when it cannot be told."""
    try:
        m = _VERSION.search(os.path.basename(os.readlink("/proc/%d/exe" % pid)))
        if m:
            return int(m.group(1)), int(m.group(2))
    except OSError:
        pass
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                if "libpython" in line:
                    m = _VERSION.search(line)
                    if m:
                        return int(m.group(1)), int(m.group(2))
    except OSError:
        pass
    return None


def ptrace_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _fail(pid, why):
    sys.stderr.write("vramscope: cannot attach to pid %d: %s.\n%s\n" % (pid, why, ALTERNATIVES))
    return 2


def _v(t):
    return "%d.%d" % t


def script(socket, max_entries):
    """The code the target runs: import this vramscope and attach."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (
        "import sys\n"
        "_p = %r\n"
        "if _p not in sys.path:\n"
        "    sys.path.append(_p)\n"
        "import vramscope\n"
        "vramscope.attach(socket=%r, max_entries=%d)\n" % (parent, socket, max_entries)
    )


def attach(pid, socket=None, max_entries=100_000):
    if pid <= 0 or not os.path.exists("/proc/%d" % pid):
        sys.stderr.write("vramscope: no process with pid %d\n" % pid)
        return 2
    mine = tuple(sys.version_info[:2])
    target = target_python(pid)
    if mine < (3, 14) or not hasattr(sys, "remote_exec"):
        why = "attaching to a running process needs Python 3.14 or newer (sys.remote_exec), and this is Python %s" % _v(mine)
        if target is not None:
            why += " (pid %d runs Python %s)" % (pid, _v(target))
        return _fail(pid, why)
    if target is not None and target != mine:
        if target < (3, 14):
            return _fail(pid, "it runs Python %s; attaching needs Python 3.14 or newer (sys.remote_exec)" % _v(target))
        return _fail(pid, "it runs Python %s and this is Python %s; sys.remote_exec needs the same version"
                     % (_v(target), _v(mine)))
    scope = ptrace_scope()
    if scope == 3:
        return _fail(pid, "the kernel forbids tracing processes (kernel.yama.ptrace_scope = 3)")
    sock = os.path.abspath(socket) if socket else _paths.socket_path()
    d = os.path.join(_paths.cache_dir(), "attach")
    os.makedirs(d, mode=0o700, exist_ok=True)
    for old in os.listdir(d):  # scripts of earlier attaches, read long ago
        try:
            if time.time() - os.path.getmtime(os.path.join(d, old)) > 3600:
                os.unlink(os.path.join(d, old))
        except OSError:
            pass
    path = os.path.join(d, "attach-%d-%d.py" % (pid, int(time.time() * 1000)))
    with open(path, "w") as f:
        f.write(script(sock, max_entries))
    os.chmod(path, 0o644)  # the target may read it as another uid (root attaching)
    try:
        sys.remote_exec(pid, path)
    except PermissionError as e:
        why = "permission denied (%s)" % e
        if scope in (1, 2):
            why += "; kernel.yama.ptrace_scope = %d allows tracing only %s" % (
                scope, "children or with CAP_SYS_PTRACE" if scope == 1 else "with CAP_SYS_PTRACE")
        return _fail(pid, why)
    except (OSError, RuntimeError, ValueError) as e:
        return _fail(pid, "sys.remote_exec failed: %s" % e)
    # The target reads the script at its next safe point; it stays in ~/.cache/vramscope/attach.
    print("vramscope: pid %d will attach at its next Python bytecode boundary (daemon socket %s)" % (pid, sock))
    return 0
