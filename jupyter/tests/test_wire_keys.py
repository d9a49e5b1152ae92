"""Every key the notebook reads from the engine's and the daemon's JSON is a
key of the types generated from Go (vramscope/_api.py, written by
internal/wiregen from daemon/api and the engine's structs): a renamed JSON
tag fails here instead of leaving a table row empty.

Two checks. A static one: each module's `x.get("key")` and `x["key"]` reads
with a literal key, against the keys of the types that module reads (READERS:
the root types and every type they hold); keys that are not the wire's (the
environment, a snapshot pickle's own keys, JSON-RPC's envelope, the module's
own dicts) are listed per module with the reason. And an exact one: the
readers run on the real engine's output for the repository's snapshots, every
object in it wrapped so that reading a key its own generated type lacks fails.
"""
import ast
import os
import subprocess
import typing

import pytest

from conftest import ROOT
from vramscope import _api
from vramscope.notebook import _deepjson, _flamesvg, _names, _ranks, _report

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vramscope", "notebook")

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
    "_live.py": (("DevicesResult", "SeriesResult", "ProcessSeriesResult", "ProcessListResult", "StatusResult",
                  "IdleResult"),
                 ("error", "id", "message", "result", "used")),  # JSON-RPC's envelope; torch.cuda.mem_get_info's own dict
    "_livestatic.py": (("DevicesResult", "SeriesResult", "ProcessListResult", "StatusResult", "Result"),
                       ("running", "source", "total", "idle", "warning")),  # the view's own state (idle, warning: _live's lines of it)
    # names the agent gave tensors (analyze's named tensors, the notebook's diff of two)
    "_names.py": (("Result", "Diff", "CompareReport", "Tree"), ()),
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


# The exact check: the engine's real output, each object typed by where it
# sits (Result.sites[i] is a Site), reading a key its type lacks fails.

_HINTS = {}

# Reads of a key a type lacks that are right, and why.
ABSENT_OK = {
    ("MomentFrame", "c"): "Labeler.report relabels moment frames with the flame tree's walker, which asks every node for children",
    ("Report", "diff"): "Labeler.report takes a report or a diff report (CompareReport) and asks which",
}


def _hints(td):
    if td not in _HINTS:
        _HINTS[td] = typing.get_type_hints(td, vars(_api))
    return _HINTS[td]


def _is_typeddict(t):
    return isinstance(t, type) and issubclass(t, dict) and hasattr(t, "__annotations__")


def typed(value, hint):
    """value wrapped as hint says: a TypedDict's object refuses undeclared keys."""
    if value is None:
        return None
    if _is_typeddict(hint):
        return Strict(value, hint) if isinstance(value, dict) and not isinstance(value, Strict) else value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return typed(value, inner[0]) if len(inner) == 1 else value
    if origin is list and isinstance(value, list):
        return StrictList(value, args[0])
    return value


class Strict(dict):
    """A JSON object of the generated type td: get, [] and in refuse a key td lacks."""

    def __init__(self, data, td):
        super().__init__(data)
        self.td = td

    def _hint(self, key):
        hints = _hints(self.td)
        if (self.td.__name__, key) in ABSENT_OK:
            return typing.Any
        if key not in hints:
            raise AssertionError("the notebook reads %r of a %s, which declares %s" % (key, self.td.__name__, sorted(hints)))
        return hints[key]

    def get(self, key, default=None):
        hint = self._hint(key)
        return typed(dict.__getitem__(self, key), hint) if dict.__contains__(self, key) else default

    def __getitem__(self, key):
        hint = self._hint(key)
        return typed(dict.__getitem__(self, key), hint)

    def __contains__(self, key):
        self._hint(key)
        return dict.__contains__(self, key)


class StrictList(list):
    """A JSON array whose items are typed as hint."""

    def __init__(self, data, hint):
        super().__init__(data)
        self.hint = hint

    def __getitem__(self, i):
        v = list.__getitem__(self, i)
        return StrictList(v, self.hint) if isinstance(i, slice) else typed(v, self.hint)

    def __iter__(self):
        return (typed(v, self.hint) for v in list.__iter__(self))


@pytest.fixture(scope="module")
def engine():
    """The engine: $VRAMSCOPE_BIN, else the checkout's bin/vramscope, built when missing."""
    env = os.environ.get("VRAMSCOPE_BIN")
    if env:
        return env
    out = os.path.join(ROOT, "bin", "vramscope")
    if not os.path.exists(out):
        subprocess.run(["go", "build", "-o", out, "./cmd/vramscope"], cwd=ROOT, check=True)
    return out


def run(engine, *args):
    return _deepjson.loads(subprocess.run([engine] + list(args), check=True, capture_output=True).stdout)


SNAPS = os.path.join(ROOT, "examples", "snapshots")


def test_strict_refuses_an_undeclared_key():
    site = typed({"file": "a.py", "line": 3}, _api.Site)
    assert site.get("line") == 3
    with pytest.raises(AssertionError, match="'peak_byte' of a Site"):
        site.get("peak_byte")
    res = typed({"sites": [{"file": "a.py"}]}, _api.Result)
    with pytest.raises(AssertionError, match="of a Site"):
        res["sites"][:1][0]["lines"]


@pytest.mark.parametrize("name", ["example_train", "agent_gpt2", "agent_oom", "leak_steps"])
def test_the_report_readers_read_declared_keys(engine, name):
    path = os.path.join(SNAPS, name + ".pickle")
    b = run(engine, "analyze", "--bundle", "peak", path)
    res, tree, rep = typed(b["result"], _api.Result), typed(b["tree"], _api.Tree), typed(b["report"], _api.Report)
    assert _report.top_lines(res, None) and _report.facts(res, name)
    _report.findings(res, None)
    _report.named_tensors(res)
    assert _flamesvg.render(tree)
    labeler = _names.Labeler({})
    labeler.report(rep)
    labeler.tree(tree)


def test_the_diff_readers_read_declared_keys(engine):
    a, b = os.path.join(SNAPS, "example_train.pickle"), os.path.join(SNAPS, "leak_steps.pickle")
    d = typed(run(engine, "diff", "--json", a, b), _api.Diff)
    assert _report.diff_rows(d, None) and _report.diff_facts(d)
    _names.Labeler({}).report(typed(run(engine, "diff", "--report", a, b), _api.CompareReport))


def test_the_rank_readers_read_declared_keys(engine, tmp_path):
    # The three whatif recordings stand in for ranks 0, 1 and 2 (as in test_ranks.py).
    files = []
    for rank, n in enumerate((2, 4, 8)):
        files.append(str(tmp_path / ("snapshot_%d.pickle" % rank)))
        os.symlink(os.path.join(SNAPS, "whatif", "whatif_bs%d.pickle" % n), files[-1])
    rv = typed(run(engine, "ranks", "--json", *files), _api.Ranks)
    assert _ranks.pick(rv, None) is not None
    assert "<table" in _ranks.table_html(rv)
