"""The notebook side of vramscope, for use from code as well as through the
magics (``%load_ext vramscope``)::

    from vramscope import notebook
    w = notebook.open("snap.pickle")        # a FlameWidget (shown when it is a cell's value)
    notebook.diff("before.pickle", "after.pickle")
    w.selected                              # the frame last clicked: {name, file, line, path}
    notebook.last()                         # the report the magics displayed last

Every analysis runs in the Go engine (vramscope.notebook._engine); this
package only arranges its results: the magics (_magic, _cell), the widget and
the live view (_widget, _live), the reports and their static HTML (_views,
_report, _html, _flamesvg). Needs IPython, and anywidget for the interactive
widget (pip install 'vramscope[notebook]'); without anywidget the reports are
static HTML.

It sits above vramscope.agent (the magics attach the agent in their own
process) and never the other way round. Its names load on first use, so that
importing one of its modules (pytest_plugin imports _engine) does not import
IPython.
"""
import importlib

# name -> the module of this package that defines it
_NAMES = {
    "EngineError": "_engine", "find_binary": "_engine",
    "VramscopeMagics": "_magic", "diff_report": "_views", "file_report": "_views",
    "anywidget_available": "_widget", "flame_widget_class": "_widget", "last": "_widget",
    "live_widget_class": "_widget",
}


def __getattr__(name):
    mod = _NAMES.get(name)
    if mod is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    return getattr(importlib.import_module("." + mod, __name__), name)


def __dir__():
    return sorted(set(globals()) | set(_NAMES))


def open(path, weight="peak", top=10):  # noqa: A001 (mirrors %vramscope open)
    """The report of a snapshot file: flame graph, top lines, findings."""
    from ._views import file_report

    return file_report(path, weight, top)


def diff(a, b, top=20):
    """The change from snapshot a to snapshot b, per line, with b's flame graph."""
    from ._views import diff_report

    return diff_report(a, b, top)


def flame(tree, title=None):
    """A widget for a flame tree already in hand (flame.Tree JSON, as `vramscope flame --format json` writes)."""
    from ._widget import flame_widget_class

    return flame_widget_class().from_tree(tree, title)
