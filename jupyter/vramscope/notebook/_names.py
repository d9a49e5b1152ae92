"""Cell-relative names: "cell [3], line 5" instead of the file names IPython
gives the code of notebook cells.

IPython compiles each cell under a file name of its own and remembers which
execution count it belongs to (IPython.core.compilerop.CachingCompiler's
_filename_map, filled by cache()): `<ipython-input-3-1a2b…>` in plain IPython,
`/tmp/ipykernel_PID/HASH.py` under ipykernel (ipykernel.compiler.XCachingCompiler).
A snapshot recorded in another kernel still carries such names; they read
"cell [?]" unless the number is in the name itself.
"""
import re

_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-fA-F]+>$")
_KERNEL = re.compile(r"(?:^|[/\\])ipykernel_\d+[/\\]\d+\.py$")


def cell_files(shell=None):
    """{file name: execution count} of the cells this kernel has compiled."""
    if shell is None:
        try:
            from IPython import get_ipython

            shell = get_ipython()
        except Exception:
            shell = None
    fm = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return dict(fm) if isinstance(fm, dict) else {}


class Labeler:
    """Names frames of notebook cells by their execution count.

    files: {file name: execution count}, as cell_files() returns (the running
    kernel's, when None).
    """

    def __init__(self, files=None):
        self.files = cell_files() if files is None else dict(files)
        self.real = {}  # label -> a real file name of that cell, for linecache

    def cell(self, file):
        """The cell's execution count (int), "?" for a cell of another kernel, or None."""
        if not file:
            return None
        n = self.files.get(file)
        if n is not None:
            return n
        m = _INPUT.match(file)
        if m:
            return int(m.group(1))
        if _KERNEL.search(file):
            return "?"
        return None

    def cell_name(self, file):
        """"cell [3]" for a cell's file, else None."""
        n = self.cell(file)
        if n is None:
            return None
        name = "cell [%s]" % n
        self.real.setdefault(name, file)
        return name

    def label(self, file, line=0):
        """"cell [3], line 5" for a cell's file, else "file:line" (or file)."""
        name = self.cell_name(file)
        if name is None:
            return "%s:%d" % (file, line) if file and line else (file or "")
        return "%s, line %d" % (name, line) if line else name

    def engine_names(self):
        """{recorded file: "cell [N]"} for this kernel's cells: the engine's
        --names, so that its own texts (finding titles and fixes, phase names
        such as "[backward pass of cell [3]:4]") name cells as this does,
        without rewriting its text afterwards."""
        return {f: "cell [%s]" % n for f, n in self.files.items()}

    def report(self, report):
        """Relabels a report (analyze --report) in place as tree() does a flame
        tree, so its moments, top lines and findings name the same frames as
        the tree they are drawn with. Returns it."""
        if not isinstance(report, dict):
            return report
        self.tree({"root": {"c": list((report.get("moments") or {}).get("frames") or [])}})
        places = list(report.get("sites") or []) + list((report.get("diff") or {}).get("sites") or [])
        for f in report.get("findings") or []:
            places.append(f)
            places.extend((f.get("evidence") or {}).get("lines") or [])
        for p in places:
            name = self.cell_name(p.get("file")) if p.get("file") else None
            if name is not None:
                p["file"] = name
        return report

    def tree(self, tree):
        """Relabels a flame tree in place: cell frames get the file "cell [N]"
        (their line stays; phase names come named from the engine, --names).
        Returns it."""
        root = tree.get("root") if isinstance(tree, dict) else None
        if not root:
            return tree
        cache = {}
        stack = [root]
        while stack:
            node = stack.pop()
            f = node.get("f")
            if f:
                name = cache.get(f, False)
                if name is False:
                    name = cache[f] = self.cell_name(f)
                if name is not None:
                    node["f"] = name
            c = node.get("c")
            if c:
                stack.extend(c)
        return tree
