"""Every key the notebook reads from the engine's and the daemon's JSON is a
key of the types generated from Go (vramscope/_api.py, written by
internal/wiregen from daemon/api and the engine's structs): a renamed JSON
tag fails here instead of leaving a table row empty.

The check is static: each module's `x.get("key")` and `x["key"]` reads with a
literal key, against the keys of the types that module reads (READERS: the
root types and every type they hold). Keys that are not the wire's (the
environment, a snapshot pickle's own keys, JSON-RPC's envelope, the module's
own dicts) are listed per module with the reason.
"""
import ast
import os
import typing

import pytest

from vramscope import _api

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vramscope")

# module: (the generated types whose JSON it reads, keys it reads that are not the wire's)
READERS = {
    # analyze --json, diff --json, whatif --json (Result, Diff, WhatIf) as tables and facts
    "_report.py": (("Result", "Diff", "WhatIf"), ()),
    # ranks --json (analyze.Ranks) and the group a daemon stored
    "_ranks.py": (("Ranks", "GroupResult"), ()),
    # flame --format json (flame.Tree)
    "_flamesvg.py": (("Tree",), ()),
    # the report page: the analysis, the diff, the flame tree, its own view model
    "_html.py": (("Result", "Diff", "Tree", "Report"),
                 ("diff", "facts", "label", "peak_line", "side", "top_lines", "tree", "where")),  # the page's own model (_views)
    # the widget: the report, the flame tree; its own messages and the web files' manifest
    "_widget.py": (("Result", "Report", "Tree", "Diff"),
                   ("global", "id", "new", "part", "path", "scripts", "side", "styles", "total")),  # its messages, selection and files.json
    # %vramscope magics: the analysis and the daemon's snapshots and processes
    "_magic.py": (("Result", "SnapshotResult", "ProcessListResult", "Diff", "GroupResult"),
                  ("VramscopeMagics", "number", "ran")),  # IPython's own (the magics class, a cell's number)
    # the live view: counters and the daemon's processes
    "_live.py": (("DevicesResult", "SeriesResult", "ProcessSeriesResult", "ProcessListResult", "StatusResult"),
                 ("error", "id", "message", "result", "used")),  # JSON-RPC's envelope; torch.cuda.mem_get_info's own dict
    "_livestatic.py": (("DevicesResult", "SeriesResult", "ProcessListResult", "StatusResult", "Result"),
                       ("running", "source", "total")),  # the view's own state
    # names the agent gave tensors (analyze's named tensors, the notebook's diff of two)
    "_names.py": (("Result", "Diff", "Report", "Tree"), ("diff",)),
    # one cell's capture: the analysis; a snapshot pickle's own keys
    "_cell.py": (("Result",), ("device_traces", "filename", "number", "recording")),  # + the agent's own status()
}


def _types(roots):
    """The generated TypedDicts reachable from roots (their members' types too)."""
    seen, todo = {}, [getattr(_api, r) for r in roots]
    while todo:
        t = todo.pop()
        if not (isinstance(t, type) and issubclass(t, dict)) or t.__name__ in seen:
            continue
        seen[t.__name__] = t
        for hint in typing.get_type_hints(t, vars(_api)).values():
            todo.extend(_leaves(hint))
    return seen


def _leaves(hint):
    args = typing.get_args(hint)
    return [hint] if not args else [x for a in args for x in _leaves(a)]


def _keys(types):
    return set().union(*(t.__annotations__.keys() for c in types.values() for t in c.__mro__ if hasattr(t, "__annotations__")))


def reads(source):
    """(line, key) of every read with a literal string key: x.get("k", …) and x["k"]."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
              and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            out.append((node.lineno, node.slice.value))
    return out


def unknown_reads(module, source):
    roots, own = READERS[module]
    known = _keys(_types(roots)) | set(own)
    return ["%s:%d reads %r, which none of %s has" % (module, line, key, ", ".join(roots))
            for line, key in reads(source) if key not in known]


@pytest.mark.parametrize("module", sorted(READERS))
def test_every_key_read_is_a_wire_key(module):
    with open(os.path.join(PKG, module), encoding="utf-8") as f:
        src = f.read()
    assert reads(src), "%s reads no key: READERS is out of date" % module
    assert unknown_reads(module, src) == []


def test_a_renamed_key_is_caught():
    # What a renamed JSON tag looks like to the check: analyze.Site's
    # "peak_bytes" read under an old name.
    with open(os.path.join(PKG, "_report.py"), encoding="utf-8") as f:
        src = f.read()
    assert '"peak_bytes"' in src
    bad = unknown_reads("_report.py", src.replace('s.get("peak_bytes")', 's.get("peak_byte")', 1))
    assert len(bad) == 1 and "'peak_byte'" in bad[0]


def test_the_roots_are_generated():
    for module, (roots, _) in READERS.items():
        for r in roots:
            assert isinstance(getattr(_api, r, None), type), "%s: _api has no %s (make generate)" % (module, r)
    assert {"file", "line", "peak_bytes"} <= _keys(_types(["Result"]))
    assert "pre_trace_bytes" in _keys(_types(["Result"]))
