"""The IPython magics (`%load_ext vramscope`):

    %%vramscope [--weight peak|alloc|current] [--top N] [--max-entries N]
    %vramscope open FILE [--weight W] [--top N]
    %vramscope diff A B [--top N]
    %vramscope snapshot [--weight W] [--top N]
    %vramscope live [--interval S] [--device N] [--socket PATH]
    %vramscope ranks GROUP | FILE FILE... [--rank N] [--weight W] [--top N]
    %vramscope snap PID --job [--rank N] [--label L] [--socket PATH]

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
import os
import pickle
import shlex
import time

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from . import _engine, _widget
from ..agent import _torch
from ._cell import CellRecording, cell_number, peak_line, run_body, trace_events, trim  # noqa: F401 (trim: tests)
from ._views import diff_report, file_report, note, snapshot_view, tempdir  # noqa: F401 (vramscope.notebook)

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
    r = sub.add_parser("ranks", add_help=False)
    r.add_argument("sources", nargs="+")
    _rank_flags(r)
    sn = sub.add_parser("snap", add_help=False)
    sn.add_argument("pid", type=int)
    sn.add_argument("--job", action="store_true")
    sn.add_argument("--label", default=None)
    _rank_flags(sn)
    return p


def _rank_flags(p):
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--weight", type=_weight, default="peak")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--socket", default=None)


USAGE = ("usage: %vramscope open FILE | diff A B | snapshot | live | ranks GROUP|FILES | snap PID --job   "
         "(%%vramscope [--weight peak|alloc|current] [--top N] [--max-entries N] on a cell)")


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
            if args.cmd in ("ranks", "snap"):
                return self._ranks(args)
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

    def _ranks(self, args):
        """The ranks of one job: a stored group, files (one per rank), or a
        group taken now (snap PID --job)."""
        from . import _ranks

        if args.cmd == "snap":
            if not args.job:
                raise UsageError("%vramscope snap PID --job: every rank of PID's launch (this kernel: %vramscope snapshot)")
            g = _ranks.take_job(args.pid, args.socket, args.label)
            note("group %s (%s): %d ranks, skew %.1f ms%s" % (g["id"], g["job"], len(g["members"]), g["skew_ms"],
                 "; failed: " + ", ".join("rank %d (%s)" % (f["rank"], f["error"]) for f in g["failed"]) if g.get("failed") else ""))
            sources = [g["id"]]
        else:
            sources = args.sources
            if not _ranks.is_group(sources):
                for f in sources:
                    _need_file(f)
        rv, files = _ranks.rank_view(sources, args.socket)
        for out in _ranks.show(rv, files, args.rank, args.weight, args.top):
            display(out)

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
