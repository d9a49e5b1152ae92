"""The notebook's reports of snapshot files: one snapshot, or the change
between two (the engine's analysis, named for the notebook by _names, shown
by _widget). The magics (_magic) and vramscope.notebook use them."""
import atexit
import os
import shutil
import sys
import tempfile
import threading

from . import _engine, _names, _report, _widget

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


def snapshot_view(path, weight="peak", top=10, labeler=None, title=None, name=None):
    """Analyses a snapshot file with the engine: (view, labeler)."""
    labeler = labeler or _names.Labeler()
    result, tree, report = _engine.analyze_and_flame(path, weight, with_report=True, names=labeler.engine_names())
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
    names = labeler.engine_names()
    d = _engine.diff(a, b, names)
    tree = _engine.flame(b, "peak", names)
    labeler.tree(tree)
    view = {"title": "diff %s \u2192 %s" % (os.path.basename(a), os.path.basename(b)),
            "facts": _report.diff_facts(d), "diff": _report.diff_rows(d, labeler, top), "tree": tree,
            "side": "after", "note": "flame graph: after (%s)" % os.path.basename(b),
            "report": labeler.report(_engine.diff_report(a, b, names))}
    return _widget.report(view, files={"after": b, "before": a}, labeler=labeler)
