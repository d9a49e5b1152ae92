"""The Go engine, run as a program: every analysis the notebook shows comes from
`vramscope analyze --json`, `vramscope flame --format json` and
`vramscope diff --json` — there is no second analyser in Python.

Which binary: $VRAMSCOPE_BIN; else one bundled in the wheel
(vramscope/bin/vramscope); else `vramscope` on PATH (when it is the Go program,
not a Python entry point); else the checkout's bin/vramscope (make build) when
the package runs from the repository.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from . import _deepjson

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # vramscope/, where bin/ is
BUNDLED = os.path.join(PKG_DIR, "bin", "vramscope")
CHECKOUT = os.path.join(os.path.dirname(os.path.dirname(PKG_DIR)), "bin", "vramscope")
TIMEOUT = float(os.environ.get("VRAMSCOPE_ENGINE_TIMEOUT", "600"))
WEIGHTS = ("peak", "alloc", "current")


class EngineError(Exception):
    """The engine could not be found, or it failed; the message says which and why."""


def _executable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def _is_script(path):
    """A Python console script named vramscope is not the engine."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        return True
    return head == b"#!"


def find_binary():
    """The path of the vramscope engine, or EngineError saying where it looked."""
    env = os.environ.get("VRAMSCOPE_BIN")
    if env:
        if _executable(env):
            return env
        raise EngineError("VRAMSCOPE_BIN=%s is not an executable file" % env)
    if _executable(BUNDLED):
        return BUNDLED
    on_path = shutil.which("vramscope")
    if on_path and not _is_script(on_path):
        return on_path
    if _executable(CHECKOUT):
        return CHECKOUT
    raise EngineError("the vramscope engine was not found: this install of the package carries none (a platform "
                      "wheel does: `make dist` builds them into dist/), `vramscope` is not on PATH "
                      "(`go install ./cmd/vramscope` in a checkout of vramscope) and VRAMSCOPE_BIN is "
                      "not set; in a checkout, `make build` makes bin/vramscope")


def main():
    """The `vramscope` console script of a platform wheel: runs the engine it carries."""
    try:
        exe = BUNDLED if _executable(BUNDLED) else find_binary()
    except EngineError as e:
        sys.stderr.write("vramscope: %s (this wheel carries no engine for this platform; pip install a platform "
                         "wheel that `make dist` builds, or go install ./cmd/vramscope in a checkout of vramscope)\n" % e)
        return 1
    if os.name != "posix":
        return subprocess.call([exe] + sys.argv[1:])
    os.execv(exe, [exe] + sys.argv[1:])


def run(args, timeout=None):
    """Run the engine with args and return its standard output (bytes)."""
    exe = find_binary()
    try:
        p = subprocess.run([exe] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout or TIMEOUT)
    except subprocess.TimeoutExpired:
        raise EngineError("vramscope %s timed out" % args[0]) from None
    except OSError as e:
        raise EngineError("could not run %s: %s" % (exe, e)) from None
    if p.returncode != 0:
        msg = p.stderr.decode("utf-8", "replace").strip().splitlines()
        raise EngineError(msg[-1] if msg else "vramscope %s exited with status %d" % (args[0], p.returncode))
    return p.stdout


def run_json(args, timeout=None, names=None):
    """The engine's JSON output; names ({recorded file: name}) are the names
    its texts give those files (--names: finding titles, phase names)."""
    if names:
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="vramscope-names-", delete=False) as f:
            json.dump(names, f)
        try:
            out = run([args[0], "--names", f.name] + list(args[1:]), timeout)
        finally:
            os.unlink(f.name)
    else:
        out = run(args, timeout)
    try:
        return _deepjson.loads(out)  # a flame tree nests deeper than json.loads goes
    except ValueError as e:
        raise EngineError("vramscope %s printed no JSON (%s)" % (args[0], e)) from None


def analyze(path, names=None):
    """The analysis (analyze.Result) of a snapshot file."""
    return run_json(["analyze", "--json", path], names=names)


def flame(path, weight="peak", names=None):
    """The flame tree (flame.Tree: {title, weight, unit, root}) of a snapshot file."""
    if weight not in WEIGHTS:
        raise EngineError("weight must be one of %s" % ", ".join(WEIGHTS))
    return run_json(["flame", "--format", "json", "--weight", weight, path], names=names)


def report(path, names=None):
    """The data of the linked report (analyze --report: timeline, moments, top lines, findings)."""
    return run_json(["analyze", "--report", path], names=names)


def diff_report(a, b, names=None):
    """The report of b with a's timeline overlaid and the per-line diff (diff --report)."""
    return run_json(["diff", "--report", a, b], names=names)


def diff(a, b, names=None):
    """Per-line change from snapshot a to snapshot b (analyze.Diff)."""
    return run_json(["diff", "--json", a, b], names=names)


def analyze_and_flame(path, weight="peak", with_report=False, names=None):
    """analyze(), flame() and, with with_report, report() of one file, from one
    engine run that reads the snapshot once (analyze --bundle; three runs side
    by side took twice as long on 2 cores, docs/page-bench.md):
    (result, tree) or (result, tree, report)."""
    if weight not in WEIGHTS:
        raise EngineError("weight must be one of %s" % ", ".join(WEIGHTS))
    b = run_json(["analyze", "--bundle", weight, path], names=names)
    if not isinstance(b, dict) or not all(k in b for k in ("result", "tree", "report")):
        raise EngineError("vramscope analyze --bundle printed no result, tree and report")
    return (b["result"], b["tree"], b["report"]) if with_report else (b["result"], b["tree"])
