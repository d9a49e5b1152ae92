"""The tensor walk's second part (see _tensors.py): run only while some CUDA
tensor the garbage collector knows is still unnamed, it looks for what holds
it however deep, cheapest and most telling first, and stops once every such
tensor is named or the walk's time is up:

- locals of every thread's frames, nested objects and containers included;
- every module's attributes other than its parameters, buffers and children
  (private ones, hooks' closures) to the same depth;
- the module-level globals of every imported module, the user's own modules
  and ``__main__`` first, then libraries, torch's own last; the standard
  library is skipped. A global's classes and functions are entered only in
  the module that defines them (class attributes, closures, lru_cache
  entries), and each name gets the file and line where its global is
  defined."""
import linecache
import os
import re
import sys
import sysconfig
import time
import types

from . import _holders

_PKG = __name__.split(".", 1)[0]  # vramscope: its own globals are not the program's
_MODULE_OWN = frozenset(("_parameters", "_buffers", "_modules", "training"))  # named by the module route
_MODULE_DICT = types.ModuleType.__dict__["__dict__"]


def holders(w, frames):
    """Name what the first part left unnamed, by route: the first two get at
    most half the time left each (a local holding a large object graph must
    not leave the globals no time), the last all of it."""
    end = w.deadline
    for route in (_locals, _attributes):
        if not w.remaining:
            return
        w.deadline = time.perf_counter() + (end - time.perf_counter()) / 2
        try:
            route(w, frames)
        except _holders.OutOfTime:
            w.truncated = True
        finally:
            w.deadline = end
    if w.remaining:
        _globals(w, frames)


def _locals(w, frames):
    seen = set()
    for f in frames:
        local = _holders.frame_locals(f)
        if local is None:
            continue
        site, items = local
        for k, v in items:
            if type(k) is str and w.remaining:
                _holders.reach(w, v, k, site, seen)


def _attributes(w, frames):
    seen = set()
    for path, m in w.module_paths:
        d = _holders.instance_dict(m, type(m)) or {}
        site = _holders.Site("attribute", module=path)
        for k, v in list(d.items()):
            if type(k) is str and k not in _MODULE_OWN and w.remaining:
                _holders.reach(w, v, "%s.%s" % (path, k), site, seen)


def _globals(w, frames):
    seen = set()
    for name, mod, file in _modules():
        try:
            items = list(_MODULE_DICT.__get__(mod).items())
        except Exception:
            continue
        prefix = "" if name == "__main__" else name + "."
        site = _holders.Site("global", file=file, home=name)
        for k, v in items:
            if not w.remaining:
                return
            if type(k) is not str or k.startswith("__"):
                continue
            _holders.reach(w, v, prefix + k, site, seen)
            if site.rows:
                _locate(site.rows, file, prefix + k, v)
                site.rows = []


def _modules():
    """(name, module, file) of the imported modules worth walking, in the
    order they are walked: __main__ and the user's own, libraries, torch."""
    std = {os.path.normcase(p) for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")) if p}
    user, lib, torch = [], [], []
    for name, mod in list(sys.modules.items()):
        if not issubclass(type(mod), types.ModuleType) or name == _PKG or name.startswith(_PKG + "."):
            continue
        try:
            file = _MODULE_DICT.__get__(mod).get("__file__")
        except Exception:
            continue
        file = file if type(file) is str else ""
        packaged = "site-packages" in file or "dist-packages" in file
        if name == "__main__":
            user.insert(0, (name, mod, file))
        elif not file or (not packaged and os.path.normcase(file).startswith(tuple(std))):
            continue  # builtin, frozen or standard library
        elif name == "torch" or name.startswith("torch."):
            torch.append((name, mod, file))
        else:
            (lib if packaged else user).append((name, mod, file))
    return user + lib + torch


def _locate(rows, file, root, v):
    """Set the file and line where each row's holder is defined: the global
    root, or for a class's attribute the line in the class that assigns it."""
    line = defined_at(file, root.rsplit(".", 1)[-1], v)
    attrs = {}
    for row in rows:
        row[6], row[7] = file, line
        if issubclass(type(v), type) and line:
            attr = re.split(r"[.\[]", row[4][len(root) + 1:], maxsplit=1)[0]
            if attr not in attrs:
                attrs[attr] = _assigned(file, attr, line, indented=True) or line
            row[7] = attrs[attr]


def _assigned(file, name, after=0, indented=False):
    """The first line after line `after` of file that assigns name (at module
    level, or indented in a class body), else 0."""
    rx = re.compile((r"\s+" if indented else "") + r"%s\s*(:[^=]*)?=(?!=)" % re.escape(name))
    for i, text in enumerate(linecache.getlines(file)[after:], after + 1):
        if rx.match(text):
            return i
    return 0


def defined_at(file, name, v):
    """The line where the global name is defined in file: a function's (or
    the function an lru_cache wraps) first line, a class's "class" line, else
    the first line at module level assigning it; 0 when unknown."""
    fn = v
    if type(v).__name__ == "_lru_cache_wrapper":
        fn = (_holders.instance_dict(v, type(v)) or {}).get("__wrapped__")
    if type(fn) is types.FunctionType:
        return int(fn.__code__.co_firstlineno)
    if not file:
        return 0
    if not issubclass(type(v), type):
        return _assigned(file, name)
    rx = re.compile(r"class\s+%s\b" % re.escape(name))
    return next((i for i, text in enumerate(linecache.getlines(file), 1) if rx.match(text)), 0)
