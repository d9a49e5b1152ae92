"""Running one cell under %%vramscope: the allocator's recording around it
(CellRecording), the cell's code run as IPython would run it (run_body), and
the snapshot narrowed to the cell (trim). The promises are _magic's.

This module's name starts with "_" on purpose: the engine counts
vramscope/_*.py frames as library code, not as the user's.
"""
import ast
import sys
import time

from . import _report
from ..agent import _torch
from ._views import note

class CellRecording:
    """Starts the allocator's history for one cell unless it already runs, and
    puts things back afterwards. Never initialises CUDA itself: when the cell
    is the one that does, recording starts from torch's CUDA-init hook."""

    def __init__(self, torch, max_entries):
        self.torch = torch
        self.max_entries = max_entries
        self.active = False
        self.started = False  # we started the recording (and stop it)
        self.user = False  # it was already recording (the user's or the agent's)
        self.start_us = 0
        self.before = {}  # device -> (allocated, max_allocated) at the cell's start

    def _enabled(self):
        f = getattr(getattr(self.torch, "_C", None), "_cuda_isHistoryEnabled", None)
        if f is None:
            try:
                from ..agent import _agent

                st = _agent.status()
                return bool(st.get("recording"))
            except Exception:
                return False
        try:
            return bool(f())
        except Exception:
            return False

    def _begin(self):
        """At the cell's start, or inside torch's CUDA init (must not raise)."""
        if not self.active:
            return
        try:
            if self._enabled():
                self.user = True
                return
            _torch.start_recording(self.torch, self.max_entries, "python")
            self.started = True
        except Exception as e:
            note("could not start recording: %s" % e)

    def start(self):
        t = self.torch
        self.active = True
        self.start_us = int(time.time() * 1e6)
        if _torch.cuda_initialized(t):
            self.before = self.counters()
            self._begin()
        else:
            how = _torch.on_cuda_init(t, self._begin)
            if how is None:
                note("could not arrange recording at CUDA initialisation")

    def counters(self):
        out = {}
        try:
            for d in range(int(self.torch.cuda.device_count())):
                out[d] = (int(self.torch.cuda.memory_allocated(d)), int(self.torch.cuda.max_memory_allocated(d)))
        except Exception:
            pass
        return out

    def finish(self):
        """The snapshot (a dict) after the cell, or None when nothing was recorded.
        Stops the recording if it was started here."""
        self.active = False
        if not (self.started or self.user):
            return None
        try:
            return self.torch.cuda.memory._snapshot()
        finally:
            if self.started:
                _torch.stop_recording(self.torch)
                self.started = False


def trim(snap, start_us, body_file, drop_before=False):
    """Narrows a snapshot to one cell: frames outside the cell's code (IPython,
    ipykernel, this magic) are cut from each stack that runs through it, and with
    drop_before the trace events from before the cell are dropped (the engine then
    counts what they left allocated as allocated before the trace)."""

    done = {}  # id(list) -> its cut: stacks torch shares stay shared (and pickle once)

    def cut(frames):
        if not frames:
            return frames
        out = done.get(id(frames))
        if out is not None:
            return out[1]
        out = frames
        for i in range(len(frames) - 1, -1, -1):
            if frames[i].get("filename") == body_file:
                out = frames[: i + 1]
                break
        done[id(frames)] = (frames, out)  # keeps frames alive, so its id is not reused
        return out

    traces = snap.get("device_traces") or []
    for i, tr in enumerate(traces):
        if drop_before:
            tr = traces[i] = [e for e in tr if (e.get("time_us") or 0) >= start_us]
        for e in tr:
            fr = e.get("frames")
            if fr:
                e["frames"] = cut(fr)
    for seg in snap.get("segments") or []:
        if seg.get("frames"):
            seg["frames"] = cut(seg["frames"])
        for b in seg.get("blocks") or []:
            if b.get("frames"):
                b["frames"] = cut(b["frames"])
    return snap


def trace_events(snap):
    return sum(len(t) for t in snap.get("device_traces") or [])


def peak_line(result, before, start_us):
    """"peak during the cell X (+Y over the Z in use at its start) · process peak before the cell W"."""
    peak = result.get("peak") or {}
    dev = peak.get("device", 0)
    during = int(peak.get("bytes") or 0)
    at_start, max_before = before.get(dev, (0, 0))
    s = "peak during the cell %s" % _report.fmt_bytes(during)
    if at_start:
        s += " (%s over the %s in use at its start)" % (_report.fmt_delta(during - at_start), _report.fmt_bytes(at_start))
    s += " \u00b7 process peak before the cell %s" % _report.fmt_bytes(max_before)
    if during > max_before:
        s += " \u2014 a new high"
    if len(before) > 1:
        s += " (device %d)" % dev
    return s


def _prepare(shell, cell, line):
    """The cell's code, transformed as IPython would (magics, !shell) and padded
    so that line numbers match the cell as shown, %%vramscope line included."""
    transformed = shell.transform_cell(cell)
    lead = 0
    for ln in cell.splitlines():
        if ln.strip():
            break
        lead += 1
    first = transformed.splitlines()[0] if transformed.strip() else ""
    if lead and first.strip():
        transformed = "\n" * lead + transformed
    header = "# %%%%vramscope %s\n" % line.strip()
    return header + transformed, header + cell


def cell_number(shell):
    """The execution count of the cell running now: that of the innermost cell
    on the stack (IPython 9 has already counted it in shell.execution_count,
    older versions not yet)."""
    fm = getattr(shell.compile, "_filename_map", {})
    f = sys._getframe(1)
    while f is not None:
        n = fm.get(f.f_code.co_filename)
        if n is not None:
            return n
        f = f.f_back
    return shell.execution_count


def run_body(shell, cell, line, state=None):
    """Runs the cell in the user's namespace and returns the value of its last
    expression (None if it ends with a statement); raises what the cell raises.
    state (a dict) gets "file": the cell's file name, and "ran": True once the
    cell's code starts running."""
    __tracebackhide__ = True  # noqa: F841 (IPython leaves these frames out of tracebacks)
    state = {} if state is None else state
    source, raw = _prepare(shell, cell, line)
    n = state.get("number") or cell_number(shell)
    filename = state["file"] = shell.compile.cache(source, n, raw_code=raw)
    tree = shell.compile.ast_parse(source, filename=filename)
    tree = shell.transform_ast(tree)
    body = list(tree.body)
    last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
    g, ns = shell.user_global_ns, shell.user_ns
    state["ran"] = True
    if body:
        exec(shell.compile(ast.Module(body=body, type_ignores=[]), filename, "exec"), g, ns)
    if last is not None:
        value = eval(shell.compile(ast.Expression(body=last.value), filename, "eval"), g, ns)
        # IPython looks for the ";" that hides a value in the cell it ran, which is
        # the magic call here: look in the cell's own code instead.
        if _semicolon(source):
            return None
        return value
    return None


def _semicolon(source):
    try:
        from IPython.core.displayhook import DisplayHook

        return bool(DisplayHook.semicolon_at_end_of_expression(source))
    except Exception:
        return source.rstrip().endswith(";")
