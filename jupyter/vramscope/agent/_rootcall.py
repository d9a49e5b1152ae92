"""The failing step's inputs from the stack, for a step whose root module
had no pre-hook (sparse mode between reads: _levels.Levels).

At an out-of-memory error, in this order:
1. inside the root's forward: the frame of the root's call (torch's
   _wrapped_call_impl / _call_impl, whose `self` is the root) still holds
   the call's args and kwargs, on the thread that ran out of memory or on
   the training thread;
2. after it (backward, the optimizer): the frame that called the root at
   a read step (its code and line: `site`, looked for every SITE_READS
   reads), still running on the training thread past that line, holds
   what it passed; the call's arguments are read back from the source
   (ast), as far as they are names, constant subscripts of dicts, lists,
   tuples and UserDicts, attributes found in an instance's or module's own
   dict (a torch.nn.Module's children too), and shape-keeping methods
   (.to(), .cuda(), ...) of those. Nothing is evaluated: no user code runs.
Otherwise none.
"""
import ast
import linecache
import sys
import types

# methods whose result has its receiver's shape: `model(ids.to(dev))` is ids' shape
SHAPE_KEEPING = frozenset(("to", "cuda", "cpu", "long", "int", "float", "half", "bfloat16", "double", "bool",
                           "contiguous", "detach", "clone", "pin_memory", "type", "requires_grad_"))
CALL_NAMES = ("_wrapped_call_impl", "_call_impl", "__call__")
MAX_FRAMES = 64  # frames looked at outward from the innermost


def call_codes(cls):
    """The ids of the code objects of a module class's call path (torch's
    _wrapped_call_impl and _call_impl, or a __call__ of its own): ids, as a
    code object's hash is computed anew each time from its bytecode and
    constants (40 µs a read step on the H200 while a set held the codes).
    The classes keep their functions, so the ids stay theirs."""
    out = set()
    for c in getattr(cls, "__mro__", (cls,)):
        for name in CALL_NAMES:
            code = getattr(c.__dict__.get(name), "__code__", None)
            if code is not None:
                out.add(id(code))
    return frozenset(out)


def _frames(frame):
    """frame and those outward of it, MAX_FRAMES at most."""
    f, n = frame, 0
    while f is not None and n < MAX_FRAMES:
        yield f
        f, n = f.f_back, n + 1


def caller(frame, codes):
    """(code, line) of the frame that called the module whose call frames
    (codes: call_codes) are outward of frame; None if none within MAX_FRAMES."""
    seen = False
    for f in _frames(frame):
        if id(f.f_code) in codes:
            seen = True
        elif seen:
            return f.f_code, f.f_lineno
    return None


def _root_call(frame, codes, roots):
    """(args, kwargs) of the outermost root call running in frame's stack."""
    found = None
    for f in _frames(frame):
        if id(f.f_code) in codes:
            loc = f.f_locals
            args = loc.get("args", loc.get("input"))  # torch < 2.0: _call_impl(self, *input, **kwargs)
            if any(loc.get("self") is r for r in roots) and isinstance(args, tuple):
                kw = loc.get("kwargs")
                found = (args, kw if isinstance(kw, dict) else {})
    return found


class _Opaque(Exception):
    """An expression read_back does not read."""


def _peek(node, loc, glob):
    """The value of an expression of names, constant subscripts, own
    attributes and shape-keeping calls, from a frame's variables."""
    if isinstance(node, ast.Name):
        if node.id in loc:
            return loc[node.id]
        if node.id in glob:
            return glob[node.id]
        raise _Opaque(node.id)
    if isinstance(node, ast.Attribute):
        obj = _peek(node.value, loc, glob)
        own = vars(obj) if isinstance(obj, types.ModuleType) else getattr(obj, "__dict__", None)
        if not isinstance(own, dict):
            raise _Opaque(node.attr)
        if node.attr in own:
            return own[node.attr]
        for store in ("_modules", "_parameters", "_buffers"):  # torch.nn.Module's own
            d = own.get(store)
            if isinstance(d, dict) and node.attr in d:
                return d[node.attr]
        raise _Opaque(node.attr)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        obj, key = _peek(node.value, loc, glob), node.slice.value
        if isinstance(obj, dict):
            return dict.__getitem__(obj, key)
        data = getattr(obj, "__dict__", {}).get("data")  # UserDict (transformers' BatchEncoding)
        if isinstance(data, dict):
            return dict.__getitem__(data, key)
        if isinstance(obj, (list, tuple)) and isinstance(key, int):
            return obj[key]
        raise _Opaque("subscript")
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in SHAPE_KEEPING):
        return _peek(node.func.value, loc, glob)
    raise _Opaque(type(node).__name__)


def _calls_at(filename, line):
    """The ast.Call nodes of filename whose lines take in line."""
    src = "".join(linecache.getlines(filename))
    if not src:
        return []
    try:
        tree = ast.parse(src, filename)
    except (SyntaxError, ValueError):  # the file changed since it ran
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and n.lineno <= line <= (n.end_lineno or n.lineno)]


def read_back(frame, line, roots):
    """(args, kwargs) of the root call at line of frame's code (the first
    root's where several roots are called there: `loss(model(x), y)`), read
    from frame's variables; None where no call there is a root's whose
    arguments can all be read."""
    loc, glob = frame.f_locals, frame.f_globals
    found = []
    for call in _calls_at(frame.f_code.co_filename, line):
        try:
            fn = _peek(call.func, loc, glob)
        except (_Opaque, LookupError, TypeError):
            continue
        for i, r in enumerate(roots):
            if fn is r:
                found.append((i, call))
    for _i, call in sorted(found, key=lambda ic: ic[0]):
        try:
            args, kwargs = [], {}
            for a in call.args:
                if isinstance(a, ast.Starred):
                    args.extend(_peek(a.value, loc, glob))
                else:
                    args.append(_peek(a, loc, glob))
            for k in call.keywords:
                v = _peek(k.value, loc, glob)
                if k.arg is None:
                    kwargs.update(v)
                else:
                    kwargs[k.arg] = v
        except (_Opaque, LookupError, TypeError, ValueError):
            continue
        return tuple(args), kwargs
    return None


def at_oom(roots, codes, site, tid):
    """(args, kwargs) of the failing step's root call, or None (above)."""
    if not roots:
        return None
    here = sys._getframe(1)
    got = _root_call(here, codes, roots)
    if got is not None:
        return got
    train = sys._current_frames().get(tid) if tid is not None else None
    if train is not None:
        got = _root_call(train, codes, roots)
        if got is not None:
            return got
    if site is None:
        return None
    code, line = site
    for top in (train, here):
        for f in _frames(top):
            if f.f_code is code:
                return read_back(f, line, roots) if f.f_lineno > line else None
    return None
