"""The IPython magics (`%load_ext vramscope`):

    %%vramscope [--weight peak|alloc|current] [--top N] [--max-entries N]
    %vramscope open FILE [--weight W] [--top N]
    %vramscope diff A B [--top N]
    %vramscope snapshot [--weight W] [--top N]
    %vramscope live [--interval S] [--device N] [--socket PATH]

%%vramscope records the cell's CUDA allocations and shows their flame graph,
top lines (cell-relative names), the peak before vs during the cell and the
findings. Promises (tests in jupyter/tests/test_notebook.py):
- the cell runs exactly once, in the user's namespace; its value is the
  magic's value (shown as Out[N], `;` still hides it) and its exception is
  raised as the magic's, after the report of what it allocated;
- nothing the magic does itself can lose the cell's value or raise into the
  notebook: its own failures are one line on stderr;
- the user's recording state is restored: recording started here is stopped
  here; recording the user (or the vramscope agent) had is left running;
- no CUDA: one line saying so, and the cell runs as usual.

This module's name starts with "_" on purpose: the engine counts
vramscope/_*.py frames as library code, not as the user's.
"""
import argparse
import ast
import atexit
import os
import pickle
import shlex
import shutil
import sys
import tempfile
import threading
import time

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from . import _engine, _names, _report, _torch, _widget

_tmp = []
_tmp_lock = threading.Lock()


def tempdir():
    """This kernel's directory for snapshots the widgets may still need; removed at exit."""
    with _tmp_lock:
        if not _tmp:
            d = tempfile.mkdtemp(prefix="vramscope-nb-")
            _tmp.append(d)
            atexit.register(shutil.rmtree, d, True)
        return _tmp[0]


def note(msg):
    """One line from the magic, on stderr (never in the cell's value)."""
    sys.stderr.write("vramscope: %s\n" % msg)
    sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError("%s: %s" % (self.prog, message))

    def exit(self, status=0, message=None):
        raise UsageError((message or "").strip() or self.format_usage().strip())


def _weight(s):
    if s not in _engine.WEIGHTS:
        raise argparse.ArgumentTypeError("weight must be peak, alloc or current")
    return s


def _cell_parser():
    p = _Parser(prog="%%vramscope", add_help=False)
    p.add_argument("--weight", type=_weight, default="peak")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--max-entries", type=int, default=100_000)
    return p


def _line_parser():
    p = _Parser(prog="%vramscope", add_help=False)
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    o = sub.add_parser("open", add_help=False)
    o.add_argument("file")
    o.add_argument("--weight", type=_weight, default="peak")
    o.add_argument("--top", type=int, default=10)
    d = sub.add_parser("diff", add_help=False)
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--top", type=int, default=20)
    s = sub.add_parser("snapshot", add_help=False)
    s.add_argument("--weight", type=_weight, default="peak")
    s.add_argument("--top", type=int, default=10)
    lv = sub.add_parser("live", add_help=False)
    lv.add_argument("--interval", type=float, default=1.0)
    lv.add_argument("--device", type=int, default=None)
    lv.add_argument("--socket", default=None)
    return p


USAGE = ("usage: %vramscope open FILE | diff A B | snapshot | live   "
         "(%%vramscope [--weight peak|alloc|current] [--top N] [--max-entries N] on a cell)")


# --- reports -----------------------------------------------------------------


def snapshot_view(path, weight="peak", top=10, labeler=None, title=None, name=None):
    """Analyses a snapshot file with the engine: (view, labeler)."""
    labeler = labeler or _names.Labeler()
    result, tree, report = _engine.analyze_and_flame(path, weight, with_report=True)
    labeler.tree(tree)
    labeler.report(report)
    view = {
        "report": report,
        "title": title or os.path.basename(path),
        "facts": _report.facts(result, name),
        "top_lines": _report.top_lines(result, labeler, top),
        "findings": _report.findings(result, labeler),
        "tree": tree,
        "weight": weight,
        "note": "",
        "result": result,
    }
    return view, labeler


def file_report(path, weight="peak", top=10):
    """The report of a snapshot file (a FlameWidget, or Static without anywidget)."""
    view, labeler = snapshot_view(path, weight, top)
    view.pop("result", None)
    return _widget.report(view, files={"": path}, labeler=labeler)


def diff_report(a, b, top=20):
    """The report of the change from snapshot a to snapshot b."""
    labeler = _names.Labeler()
    d = _engine.diff(a, b)
    tree = _engine.flame(b, "peak")
    labeler.tree(tree)
    view = {"title": "diff %s \u2192 %s" % (os.path.basename(a), os.path.basename(b)),
            "facts": _report.diff_facts(d), "diff": _report.diff_rows(d, labeler, top), "tree": tree,
            "side": "after", "note": "flame graph: after (%s)" % os.path.basename(b),
            "report": labeler.report(_engine.diff_report(a, b))}
    return _widget.report(view, files={"after": b, "before": a}, labeler=labeler)


# --- the cell ----------------------------------------------------------------


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
                from . import _agent

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


@magics_class
class VramscopeMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        self.live = []

    @line_cell_magic
    def vramscope(self, line, cell=None):
        """%%vramscope [--weight peak|alloc|current] [--top N] [--max-entries N]: the
        GPU memory a cell allocates, as a flame graph with its top lines and
        findings. %vramscope open FILE | diff A B | snapshot | live."""
        __tracebackhide__ = True  # noqa: F841
        if cell is None:
            return self._line(line)
        return self._cell(line, cell)

    # --- %%vramscope --------------------------------------------------------

    def _cell(self, line, cell):
        __tracebackhide__ = True  # noqa: F841
        rec = None
        args = None
        try:
            args = _cell_parser().parse_args(shlex.split(line))
            rec = self._start(args)
        except UsageError as e:
            note("%s; the cell runs without profiling" % e)
        except Exception as e:
            note("could not start (%s); the cell runs without profiling" % e)
            rec = None
        if rec is None:
            return run_body(self.shell, cell, line)
        state = {"number": cell_number(self.shell)}
        try:
            value = run_body(self.shell, cell, line, state)
        except KeyboardInterrupt:
            self._finish(rec, state, args, interrupted=True)
            raise
        except BaseException as e:
            self._finish(rec, state, args, error=e)
            raise
        self._finish(rec, state, args)
        return value

    def _start(self, args):
        """A started CellRecording, or None (after one line saying why)."""
        torch = _torch.imported()
        if torch is None:
            if not _torch.installed():
                note("no CUDA here (torch is not installed); the cell runs without profiling")
                return None
            import torch  # the cell is about to use it; importing it here changes nothing else
        if _torch.cuda_unavailable(torch):
            note("no CUDA here (%s); the cell runs without profiling" % (
                "torch is built without CUDA" if getattr(torch.version, "cuda", None) is None else "no GPU found"))
            return None
        rec = CellRecording(torch, args.max_entries)
        rec.start()
        return rec

    def _finish(self, rec, state, args, error=None, interrupted=False):
        """Restores the recording, then (unless interrupted, or the cell never
        ran: a syntax error) analyses and shows what the cell allocated. Never raises."""
        t0 = time.perf_counter()
        try:
            snap = rec.finish()
        except BaseException as e:
            note("could not take the snapshot: %s" % (e or type(e).__name__))
            return
        if interrupted or not state.get("ran"):
            return
        if snap is None:
            note("the cell did not initialise CUDA: nothing was recorded")
            return
        try:
            self._report(rec, snap, state, args, error, t0)
        except KeyboardInterrupt:
            note("report interrupted")
        except BaseException as e:
            note("could not analyse the cell: %s" % (e or type(e).__name__))

    def _report(self, rec, snap, state, args, error, t0):
        t1 = time.perf_counter()
        trim(snap, rec.start_us, state.get("file"), drop_before=rec.user)
        if trace_events(snap) == 0:
            note("the cell made no CUDA allocations")
            return
        n = state.get("number")
        path = os.path.join(tempdir(), "cell-%s-%d.pickle" % (n, int(time.time() * 1000)))
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        del snap
        t2 = time.perf_counter()
        view, labeler = snapshot_view(path, args.weight, args.top, title="cell [%s]" % n, name="cell [%s]" % n)
        t3 = time.perf_counter()
        result = view.pop("result")
        view["peak_line"] = peak_line(result, rec.before, rec.start_us)
        if error is not None:
            view["note"] = "the cell raised %s: memory up to that point" % type(error).__name__
        if rec.user:
            view["note"] = (view["note"] + "; " if view["note"] else "") + \
                "recording was already on: kept running, events before the cell left out"
        w = _widget.report(view, files={"": path}, labeler=labeler)
        display(w)
        t4 = time.perf_counter()
        # What the magic added to the cell, beyond torch's own recording.
        w.timings = {"snapshot_s": t1 - t0, "write_s": t2 - t1, "engine_s": t3 - t2, "display_s": t4 - t3,
                     "total_s": t4 - t0, "events": int(result.get("events") or 0)}

    # --- %vramscope ... --------------------------------------------------------

    def _line(self, line):
        words = shlex.split(line)
        if not words:
            raise UsageError(USAGE)
        args = _line_parser().parse_args(words)
        try:
            if args.cmd == "open":
                return self._open(args)
            if args.cmd == "diff":
                for f in (args.a, args.b):
                    _need_file(f)
                display(diff_report(args.a, args.b, args.top))
                return None
            if args.cmd == "snapshot":
                return self._snapshot(args)
            if args.cmd == "live":
                return self._live(args)
        except _engine.EngineError as e:
            raise UsageError("vramscope: %s" % e) from None
        raise UsageError(USAGE)

    def _open(self, args):
        _need_file(args.file)
        display(file_report(args.file, args.weight, args.top))

    def _snapshot(self, args):
        torch = _torch.imported()
        if torch is None or not _torch.cuda_initialized(torch):
            note("no CUDA in this kernel (%s): nothing to snapshot" % (
                "torch is not installed" if not _torch.installed() else
                "torch is not imported" if torch is None else "CUDA is not initialised"))
            return None
        recording = CellRecording(torch, 0)._enabled()
        snap = torch.cuda.memory._snapshot()
        path = os.path.join(tempdir(), "snapshot-%d.pickle" % int(time.time() * 1000))
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        del snap
        view, labeler = snapshot_view(path, args.weight, args.top, title="this kernel's GPU memory")
        view.pop("result", None)
        if not recording:
            view["note"] = ("the allocator was not recording: memory in use now, without the history "
                            "(vramscope.attach() or %%vramscope records it)")
        display(_widget.report(view, files={"": path}, labeler=labeler))

    def _live(self, args):
        from . import _live

        s = _live.Sampler(interval=args.interval, device=args.device, socket=args.socket)
        source, why = s.probe()
        if not source:
            s.close()
            note("nothing to sample: %s" % why)
            return None
        if not _widget.anywidget_available():
            s.close()
            note("the live view needs anywidget: pip install 'vramscope[notebook]'")
            return None
        w = _widget.live_widget_class()(sampler=s, source=source, note=why, device=s.device,
                                        interval=s.interval)
        for old in self.live:
            old.stop()
        self.live[:] = [w]
        display(w)
        w.start()
        return None


def _need_file(path):
    if not os.path.isfile(path):
        raise UsageError("vramscope: no such file: %s" % path)


def load(shell):
    shell.register_magics(VramscopeMagics)


def unload(shell):
    m = shell.magics_manager.registry.get("VramscopeMagics")
    if m is not None:
        for w in m.live:
            w.stop()
