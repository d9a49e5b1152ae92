"""The Python package's floors (docs/architecture.md): the shared modules
(_api.py, _paths.py) import nothing of vramscope; agent/ imports them and
itself, never notebook/ (the agent runs in every training process, the
notebook code only where a person looks); notebook/ may import both. Read from
the source's import statements, so a forbidden edge fails here, not in a job."""
import ast
import os

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vramscope")
SHARED = ("_api", "_paths")


def _imports(path, package):
    """The vramscope modules a file imports (absolute dotted names), at any depth of the file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "vramscope")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "vramscope":
                continue
            out.add(mod)
            out.update(mod + "." + a.name for a in node.names)  # `from . import _x` names a module
    return out


def _modules():
    for dirpath, dirnames, filenames in os.walk(PKG):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "_boot", "static", "bin")]
        rel = os.path.relpath(dirpath, os.path.dirname(PKG)).replace(os.sep, ".")
        for name in filenames:
            if name.endswith(".py"):
                yield os.path.join(dirpath, name), rel, name[:-3]


def _under(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


def test_floors():
    bad = []
    seen = 0
    for path, package, name in _modules():
        imports = _imports(path, package)
        here = os.path.relpath(path, os.path.dirname(PKG))
        if package == "vramscope.agent":
            seen += 1
            bad += ["%s imports %s" % (here, m) for m in sorted(imports) if _under(m, "vramscope.notebook")]
        elif package == "vramscope" and name in SHARED:
            bad += ["%s imports %s" % (here, m) for m in sorted(imports)]
    assert seen > 10, "found %d modules under %s/agent" % (seen, PKG)
    assert not bad, bad


def test_the_rule_sees_relative_imports(tmp_path):
    # the checker itself: a notebook import written relatively is found
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from ..notebook import _report\n    from . import _torch\n")
    got = _imports(str(f), "vramscope.agent")
    assert "vramscope.notebook._report" in got and "vramscope.agent._torch" in got, got
