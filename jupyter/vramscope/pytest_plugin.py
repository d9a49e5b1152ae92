"""GPU-memory gates for pytest (the ``pytest11`` entry point: installed with
the package, on by itself, costing nothing to a test without a gate).

- ``@pytest.mark.vram_limit("2 GiB")`` or ``--vram-limit 2GiB`` (every test):
  fails a test whose peak allocated memory on its CUDA device
  (``torch.cuda.max_memory_allocated``, reset when the test starts) over what
  was allocated when it began exceeds the limit;
- ``@pytest.mark.vram_leak`` (``tolerance="1 MiB"``): fails a test after
  which more memory is allocated than before it, beyond the tolerance;
- ``--vram-baseline FILE``: measures every test's peak over what was
  allocated when it began, and fails a test that grew beyond
  ``--vram-baseline-tolerance`` (default 5%, at least 1 MiB) over the file;
  tests the file lacks are added, the file is written when missing or with
  ``--vram-baseline-update``.

A failing test's message gives the top lines at its peak, from a short
recording of the allocator's history taken while the gated test ran (off
with ``--vram-no-trace``; PyTorch's recording costs every allocation a
Python stack walk), analysed by the engine, and the tensors the agent names
among what is still alive when the test ended (_tensors: parameters,
gradients, optimizer state, caches in modules). The snapshot is kept for
``vramscope analyze``. No daemon is needed. Where torch or CUDA is missing
the gates are off and the summary says how many tests ran without one.
"""
import gc
import json
import os
import re
import tempfile

import pytest

from .agent import _torch

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000 ** 2,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30, "t": 1 << 40, "tb": 1000 ** 4,
          "tib": 1 << 40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")
TRACE_ENTRIES = 100000  # the recorded window: enough for a test's allocations, bounded in memory
LEAK_TOLERANCE = "1 MiB"
BASELINE_FLOOR = 1 << 20  # a baseline's tolerance is at least this (allocator rounding, small workspaces)


def parse_size(v, what="size"):
    """Bytes from 2147483648, "2 GiB", "2G" (binary) or "2GB" (decimal)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
        return int(v)
    m = _SIZE.match(str(v))
    if not m or m.group(2).lower() not in _UNITS:
        raise pytest.UsageError("vramscope: %s %r: want a size such as 2GiB, 512MiB or 2147483648" % (what, v))
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def fmt(n):
    from .notebook._report import fmt_bytes

    return fmt_bytes(n)


def pytest_addoption(parser):
    g = parser.getgroup("vramscope", "GPU memory gates (vramscope)")
    g.addoption("--vram-limit", metavar="SIZE", help="fail every test whose peak allocated GPU memory exceeds SIZE "
                "(e.g. 2GiB); @pytest.mark.vram_limit overrides it per test")
    g.addoption("--vram-baseline", metavar="FILE", help="JSON of each test's peak GPU memory over its start: fail a "
                "test that grew past --vram-baseline-tolerance; written when missing")
    g.addoption("--vram-baseline-tolerance", metavar="PCT", default="5%",
                help="growth over the baseline allowed (default 5%%, and at least 1 MiB)")
    g.addoption("--vram-baseline-update", action="store_true", help="rewrite --vram-baseline with this run's peaks")
    g.addoption("--vram-no-trace", action="store_true", help="do not record the allocator's history while a gated "
                "test runs (failures then name no lines)")


def pytest_configure(config):
    config.addinivalue_line("markers", "vram_limit(size): fail the test when its peak allocated GPU memory exceeds "
                            "size (\"2 GiB\"); vramscope")
    config.addinivalue_line("markers", "vram_leak(tolerance=\"1 MiB\"): fail the test when more GPU memory is "
                            "allocated after it than before it, beyond tolerance; vramscope")
    config.pluginmanager.register(Gates(config), "vramscope-gates")


class Gates:
    """The gates of one session, and what they measured."""

    def __init__(self, config):
        opt = config.getoption
        self.limit = parse_size(opt("vram_limit"), "--vram-limit") if opt("vram_limit") else None
        self.baseline_path = opt("vram_baseline")
        self.tolerance = _percent(opt("vram_baseline_tolerance"))
        self.update = opt("vram_baseline_update")
        self.trace = not opt("vram_no_trace")
        self.baseline = _load_baseline(self.baseline_path) if self.baseline_path else {}
        self.measured = {}
        self.ungated = 0
        self.why_off = None
        self._torch = None
        self._dir = None

    def gates(self, item):
        """(limit, leak tolerance, baseline on) of item, or None: unmarked tests cost a marker lookup."""
        lm, leak = item.get_closest_marker("vram_limit"), item.get_closest_marker("vram_leak")
        if lm is None and leak is None and self.limit is None and not self.baseline_path:
            return None
        limit = self.limit
        if lm is not None:
            limit = parse_size(lm.args[0] if lm.args else lm.kwargs.get("size"), "vram_limit of %s" % item.nodeid)
        tol = None
        if leak is not None:
            tol = parse_size(leak.args[0] if leak.args else leak.kwargs.get("tolerance", LEAK_TOLERANCE),
                             "vram_leak of %s" % item.nodeid)
        return limit, tol, bool(self.baseline_path)

    def cuda(self):
        """torch with a usable CUDA device, else None (why_off says why); found once."""
        if self._torch is None and self.why_off is None:
            self._torch, self.why_off = _find_cuda()
        return self._torch

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        g = self.gates(item)
        torch = self.cuda() if g else None
        if torch is None:
            if g:
                self.ungated += 1
            return (yield)
        m = _Measure(torch, self.trace)
        try:
            result = yield
        except BaseException:
            m.stop()
            raise
        m.finish()
        problems = self.judge(item, g, m)
        if problems:
            msg = "\n".join(problems) + "\n" + self.explain(item, m, leak=bool(g[1]))
            m.stop()
            pytest.fail(msg, pytrace=False)
        m.stop()
        return result

    def judge(self, item, g, m):
        """The gates' verdicts: a line for each one the test failed."""
        limit, tol, baseline = g
        out = []
        if limit is not None and m.peak - m.before > limit:
            # The test's own peak: what earlier tests (or fixtures) left allocated is
            # not this test's (on the H200 a test allocating nothing failed a 1 MiB
            # limit with 337 MiB that earlier tests kept).
            out.append("vram_limit: peak allocated %s over the test's start exceeds the limit %s (device %d; peak "
                       "%s, %s allocated when the test began)" % (fmt(m.peak - m.before), fmt(limit), m.device,
                                                                    fmt(m.peak), fmt(m.before)))
        if tol is not None and m.after - m.before > tol:
            out.append("vram_leak: %s more allocated after the test than before it (%s -> %s; tolerance %s)" % (
                fmt(m.after - m.before), fmt(m.before), fmt(m.after), fmt(tol)))
        if baseline:
            grew = m.peak - m.before
            self.measured[item.nodeid] = grew
            base = _baseline_of(self.baseline, item.nodeid)
            if base is not None and not self.update and grew > base + max(BASELINE_FLOOR, base * self.tolerance):
                out.append("vram baseline: the test's peak over its start is %s, %s above the baseline %s in %s "
                           "(tolerance %.0f%%)" % (fmt(grew), fmt(grew - base), fmt(base), self.baseline_path,
                                                   100 * self.tolerance))
        return out

    def explain(self, item, m, leak):
        """Top lines at the peak (or still held, for a leak) and the named tensors."""
        if not m.tracing:
            return "(no lines: the allocator's history was not recorded (--vram-no-trace, or another recorder on)"
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="vramscope-pytest-")
        path = os.path.join(self._dir, re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-120:] + ".pickle")
        return _explain(m, path, leak)

    def pytest_report_header(self, config):
        if self.limit is not None or self.baseline_path:
            return "vramscope: vram limit %s, baseline %s" % (fmt(self.limit) if self.limit else "-",
                                                               self.baseline_path or "-")
        return None

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.ungated:
            tr.write_line("vramscope: %d test(s) with GPU-memory gates ran without them: %s" % (
                self.ungated, self.why_off))
        if self.baseline_path and self.measured and (
                self.update or not os.path.exists(self.baseline_path)
                or any(_baseline_key(self.baseline, k) is None for k in self.measured)):
            # A test known under another rootdir keeps its key: adding it under
            # this run's would store its grown peak as the next run's baseline
            # (the H200 re-run's file held both keys, the second one 2.8x the first).
            merged = dict(self.baseline)
            for nodeid, grew in self.measured.items():
                key = _baseline_key(self.baseline, nodeid)
                if key is None or self.update:
                    merged[key or nodeid] = grew
            _save_baseline(self.baseline_path, merged)
            tr.write_line("vramscope: wrote %d test peaks to %s" % (len(merged), self.baseline_path))


class _Measure:
    """One gated test's memory: before, peak and after, and its recorded window."""

    def __init__(self, torch, trace):
        self.torch = torch
        c = torch.cuda
        self.device = int(c.current_device())
        gc.collect()
        _sync(torch)
        self.before = int(c.memory_allocated(self.device))
        c.reset_peak_memory_stats(self.device)
        self.tracing = False
        if trace and not _history_on(torch):
            try:
                _torch.start_recording(torch, TRACE_ENTRIES, "python", clear=True)
                self.tracing = True
            except Exception:
                self.tracing = False
        self.peak = self.after = self.before

    def finish(self):
        c = self.torch.cuda
        _sync(self.torch)
        self.peak = int(c.max_memory_allocated(self.device))
        gc.collect()
        self.after = int(c.memory_allocated(self.device))

    def stop(self):
        if self.tracing:
            self.tracing = False
            _torch.stop_recording(self.torch)


def _explain(m, path, leak):
    from .agent import _snapfile, _tensors
    from .notebook import _engine, _report

    try:
        snap = m.torch.cuda.memory._snapshot()
        names = _tensors.name_tensors(m.torch)
        if names is not None:
            snap["vramscope_tensors"] = names
        _snapfile._write_snapshot(path, snap)
        result = _engine.analyze(path)
    except Exception as e:  # the engine missing, a torch we do not know: the verdict stands without lines
        return "(no lines: %s)" % e
    sites = result.get("sites") or []
    if leak:
        sites = sorted(sites, key=lambda s: -(s.get("current_bytes") or 0))
        head, key = "Lines holding memory when the test ended:", "current_bytes"
    else:
        head, key = "Top lines at the peak (first frame in your code):", "peak_bytes"
    lines = [head]
    for s in sites[:5]:
        if s.get(key):
            lines.append("  %10s  %s" % (fmt(s[key]), _report.site_label(s, None)))
    named = _report.named_tensors(result, top=5)
    if named:
        lines.append("Named tensors alive when the test ended: " + named[0])
        lines.extend("  " + n for n in named[1:])
    lines.append("Snapshot: %s (vramscope analyze %s)" % (path, path))
    return "\n".join(lines)


def _find_cuda():
    """(torch, None) when a CUDA device is usable, else (None, why)."""
    if not _torch.installed():
        return None, "torch is not installed"
    try:
        import torch
    except Exception as e:
        return None, "torch does not import (%s)" % e
    if _torch.cuda_unavailable(torch) or not torch.cuda.is_available():
        return None, "no CUDA device (torch %s)" % getattr(torch, "__version__", "?")
    return torch, None


def _sync(torch):
    sync = getattr(torch.cuda, "synchronize", None)
    if sync is not None:
        sync()


def _history_on(torch):
    """Whether someone (the vramscope agent, the test) records the history already: leave it alone."""
    try:
        return bool(torch._C._cuda_isHistoryEnabled())
    except Exception:
        return False


def _percent(v):
    s = str(v).strip()
    try:
        return float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise pytest.UsageError("vramscope: --vram-baseline-tolerance %r: want a percentage such as 5%%" % v) from None


def _baseline_key(baseline, nodeid):
    """The key of nodeid in baseline, also under another rootdir: pytest
    counts an existing file named by an option (the baseline itself) when it
    picks the rootdir, so a baseline outside the tests' tree turns
    ``tests/test_x.py::t`` into ``work/repo/tests/test_x.py::t`` on the next
    run. A key that one of the two ends with, after a "/", is the same test."""
    if nodeid in baseline:
        return nodeid
    same = [k for k in baseline if k.endswith("/" + nodeid) or nodeid.endswith("/" + k)]
    return same[0] if len(same) == 1 else None


def _baseline_of(baseline, nodeid):
    key = _baseline_key(baseline, nodeid)
    return None if key is None else baseline[key]


def _load_baseline(path):
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            d = json.load(f)
        peaks = d["peaks"]
        if not isinstance(peaks, dict) or not all(isinstance(v, int) for v in peaks.values()):
            raise ValueError("peaks must map test ids to byte counts")
        return peaks
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise pytest.UsageError("vramscope: --vram-baseline %s: not a baseline file (%s)" % (path, e)) from None


def _save_baseline(path, peaks):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"about": "peak allocated GPU memory of each test over what was allocated when it began, in "
                   "bytes (vramscope's pytest plugin, --vram-baseline)", "peaks": dict(sorted(peaks.items()))},
                  f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
