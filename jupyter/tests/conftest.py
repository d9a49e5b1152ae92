import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository
PKG_PARENT = os.path.dirname(HERE)  # jupyter/
FAKETORCH = os.path.join(HERE, "faketorch")
CHILD = os.path.join(HERE, "child.py")
EXAMPLE = os.path.join(ROOT, "examples", "snapshots", "example_train.pickle")
# `python -m vramscope`, also where the package is not installed and PYTHONPATH is the test's
VRAMSCOPE = [sys.executable, "-c", "import runpy, sys; sys.path.insert(0, %r); "
             "runpy.run_module('vramscope', run_name='__main__', alter_sys=True)" % PKG_PARENT]

sys.path.insert(0, HERE)
from peer import FakeDaemon  # noqa: E402

# In CI ($CI, or VRAMSCOPE_CI=1, which .ci/run exports) a test whose reference
# tool or module is missing fails instead of skipping: there the install went
# wrong, and a skipped test would pass unseen.
IN_CI = bool(os.environ.get("CI")) or os.environ.get("VRAMSCOPE_CI") == "1"


def missing(why):
    """Skips the test (or module) for why, or fails it in CI."""
    if IN_CI:
        pytest.fail("%s (in CI a reference test fails rather than skip: make setup installs it)" % why, pytrace=False)
    pytest.skip(why, allow_module_level=True)


def require_module(name, why=None):
    """pytest.importorskip, except that a missing module fails the test in CI."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(why or "%s is not installed (%s)" % (name, e))


def torch_python(*modules):
    """The interpreter with torch and the given modules (make setup's
    .venv-torch: Debian's CPU torch and the packages pinned in
    jupyter/requirements-torch.txt), or $VRAMSCOPE_TORCH_PYTHON; skips (fails
    in CI) where it is missing or cannot import them."""
    py = os.environ.get("VRAMSCOPE_TORCH_PYTHON") or os.path.join(ROOT, ".venv-torch", "bin", "python")
    if not os.access(py, os.X_OK):
        missing("no torch interpreter at %s (make setup builds .venv-torch)" % py)
    names = ", ".join(("torch",) + modules)
    probe = subprocess.run([py, "-c", "import " + names], capture_output=True, text=True)
    if probe.returncode:
        missing("%s cannot import %s: %s" % (py, names, probe.stderr.strip()[-400:]))
    return py


def skip_browser():
    """Whether VRAMSCOPE_SKIP_BROWSER=1 asks to skip the browser tests; never in CI."""
    return os.environ.get("VRAMSCOPE_SKIP_BROWSER") == "1" and not IN_CI


def pytest_configure(config):
    config.addinivalue_line("markers", "fake_only: needs the in-test peer (not the real daemon)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("VRAMSCOPE_TEST_PEER"):
        skip = pytest.mark.skip(reason="needs the in-test peer")
        for item in items:
            if "fake_only" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def tmp():
    """A short directory (Unix socket paths are limited to 107 bytes)."""
    d = tempfile.mkdtemp(prefix="vs-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def make_peer(sock, incoming, **kw):
    spec = os.environ.get("VRAMSCOPE_TEST_PEER")
    if spec and not kw:
        mod, _, fn = spec.partition(":")
        return getattr(importlib.import_module(mod), fn)(sock, incoming)
    return FakeDaemon(sock, incoming, **kw)


@pytest.fixture
def daemon(tmp):
    d = make_peer(os.path.join(tmp, "d.sock"), os.path.join(tmp, "incoming"))
    d.start()
    yield d
    d.stop()


@pytest.fixture
def env(tmp):
    """The environment of a child: the socket in tmp, a private cache (spool), no
    rank variables, no VRAMSCOPE_* from outside."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("VRAMSCOPE_") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "PYTHONPATH",
                                                         "XDG_RUNTIME_DIR")}
    e["VRAMSCOPE_SOCKET"] = os.path.join(tmp, "d.sock")
    e["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
    e["PYTHONPATH"] = PKG_PARENT
    e["PYTHONUNBUFFERED"] = "1"
    return e


class Child:
    def __init__(self, env, args=(), cwd=None, cmd=None):
        cmd = cmd or [sys.executable, CHILD] + list(args)
        self.p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.p.pid

    def __call__(self, expr):
        self.p.stdin.write(expr + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("child died: %s" % self.p.stderr.read())
        out = json.loads(line)
        if isinstance(out, dict) and set(out) == {"error"}:
            raise RuntimeError("child: %s" % out["error"])
        return out

    def wait(self, expr, timeout=10):
        """Evaluate expr in the child until it is true; returns the last value."""
        deadline = time.monotonic() + timeout
        while True:
            v = self(expr)
            if v or time.monotonic() > deadline:
                return v
            time.sleep(0.05)

    def quit(self, timeout=10):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except OSError:
            pass
        out, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, out, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate()


@pytest.fixture
def spawn():
    children = []

    def start(env, setup="", args=(), **kw):
        env = dict(env, CHILD_SETUP=setup)
        c = Child(env, args, **kw)
        children.append(c)
        return c

    yield start
    for c in children:
        c.kill()


def faketorch_env(env, **extra):
    e = dict(env)
    e["PYTHONPATH"] = os.pathsep.join([FAKETORCH, PKG_PARENT])
    e.update(extra)
    return e
