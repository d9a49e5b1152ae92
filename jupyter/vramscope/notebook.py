"""The notebook side of vramscope, for use from code as well as through the
magics (``%load_ext vramscope``)::

    from vramscope import notebook
    w = notebook.open("snap.pickle")        # a FlameWidget (shown when it is a cell's value)
    notebook.diff("before.pickle", "after.pickle")
    w.selected                              # the frame last clicked: {name, file, line, path}
    notebook.last()                         # the report the magics displayed last

Every analysis runs in the Go engine (vramscope._engine); this module only
arranges its results. Needs IPython, and anywidget for the interactive widget
(pip install 'vramscope[notebook]'); without anywidget the reports are static
HTML.
"""
from ._engine import EngineError, find_binary  # noqa: F401
from ._magic import VramscopeMagics, diff_report, file_report  # noqa: F401
from ._widget import anywidget_available, flame_widget_class, last, live_widget_class  # noqa: F401


def open(path, weight="peak", top=10):  # noqa: A001 (mirrors %vramscope open)
    """The report of a snapshot file: flame graph, top lines, findings."""
    return file_report(path, weight, top)


def diff(a, b, top=20):
    """The change from snapshot a to snapshot b, per line, with b's flame graph."""
    return diff_report(a, b, top)


def flame(tree, title=None):
    """A widget for a flame tree already in hand (flame.Tree JSON, as `vramscope flame --format json` writes)."""
    return flame_widget_class().from_tree(tree, title)
