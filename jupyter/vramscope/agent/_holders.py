"""What holds a tensor, however deep: the values nested in a local, a module
attribute or a module-level global (containers, objects' attributes and
slots, closures' cells, functools.lru_cache entries, class attributes), and
the key/value caches of language models, named by the path to them. Part of
the tensor walk (_tensors.py, whose docstring has the contract); nothing
here runs user code: attributes are read from instance dicts and slots, never
through getattr, and only builtin reprs make a key's name."""
import gc
import itertools
import os
import re
import types

MAX_DEPTH = 6        # levels below a root: SERVER.sessions['a'][3].k is 4
MAX_ITEMS = 100000   # items read from one container
ATOM_PREFIX = 256    # a container whose first items are all plain values holds no tensors (a vocabulary)
KEY_CHARS = 60       # of a string key, in a name

_ATOM = frozenset((str, bytes, bytearray, int, float, bool, complex, type(None), types.ModuleType,
                   types.CodeType, types.FrameType, types.BuiltinFunctionType, types.MethodType,
                   types.GeneratorType, types.CoroutineType, range, slice, property))
_SEQ = (list, tuple)
# Legacy past_key_values tuples are taken for a cache only under a name that says so.
_KV_NAME = re.compile(r"(?i)past|present|cache")
# A per-layer object's key and value attributes, and a cache's paired per-layer lists.
_KV_ATTRS = (("keys", "values"), ("key_cache", "value_cache"), ("k_cache", "v_cache"), ("k", "v"), ("key", "value"))


class OutOfTime(Exception):
    """The walk's time is up (raised by _tensors' clock, passed through here)."""


class Site:
    """Where one walk of nested values starts: the kind its tensors get, what
    follows their names (" in main (train.py:17)"), the module, file and line
    they are attributed to, the list that collects tensors with an autograd
    history (graph roots, or None), the module whose classes and functions
    may be entered (a global's own module), and the rows named."""

    def __init__(self, kind, where="", module="", file="", line=0, roots=None, home=None):
        self.kind, self.where, self.module, self.file, self.line = kind, where, module, file, line
        self.roots, self.home, self.rows = roots, home, []


def frame_locals(f, roots=None):
    """A frame's locals as (Site, [(name, value), ...]), or None when the frame
    cannot give them: both walks over the stacks (names and holders) start so."""
    code = f.f_code
    where = " in %s (%s:%d)" % (code.co_name, os.path.basename(code.co_filename), f.f_lineno)
    try:
        items = list(f.f_locals.items())
    except Exception:
        return None
    return Site("local", where, file=code.co_filename, line=f.f_lineno, roots=roots), items


def reach(w, value, path, site, seen, depth=MAX_DEPTH):
    """Name every CUDA tensor reachable from value within depth levels,
    each by its path from the root ("SERVER.sessions['a'][3].k"); seen holds
    the containers already entered (by id) in this route."""
    stack = [(value, path, 0, site.kind)]
    while stack:
        try:
            _visit(w, stack, site, seen, depth)
        except OutOfTime:
            raise
        except Exception:  # one object we cannot read: the others still can be
            w.errors += 1


def _visit(w, stack, site, seen, depth):
    """Name or enter the value on top of the stack."""
    v, p, d, kind = stack.pop()
    t = type(v)
    if t in _ATOM:
        return
    if issubclass(t, w.torch.Tensor):
        row = w.add(v, kind, p + site.where, site.module, site.file, site.line)
        if row is not None:
            site.rows.append(row)
        if site.roots is not None and getattr(v, "grad_fn", None) is not None:
            site.roots.append(v)
        return
    if id(v) in seen or _foreign(v, t, site.home):
        return
    # Before the modules are left out: transformers 4.46's Cache is an nn.Module.
    kv = _kv_cache(w, v, t, p) if t.__name__.endswith("Cache") or issubclass(t, _SEQ) else None
    if kv:
        seen.add(id(v))
        stack.extend((x, q, d + 1, "kv_cache") for x, q in kv)
        return
    if issubclass(t, w.skip):
        return
    if d >= depth:
        return
    seen.add(id(v))
    w.tick()
    stack.extend((x, q, d + 1, kind) for x, q in _children(w, v, t, p, site.home))


def _foreign(v, t, home):
    """Whether v is a class or function that a walk from home does not enter:
    any class outside a module's globals walk, and while walking module
    home's globals a class or function defined elsewhere (it is entered from
    its own module; marked seen here it would never be)."""
    if issubclass(t, type):
        return home is None or type.__getattribute__(v, "__dict__").get("__module__") != home
    if home is None:
        return False
    if t is types.FunctionType:
        return v.__module__ != home
    if t.__name__ == "_lru_cache_wrapper":
        return (instance_dict(v, t) or {}).get("__module__") != home
    return False


def _children(w, v, t, path, home):
    """The values directly inside v, each with its path."""
    # The builtin types' own iterators: a subclass's items() or __iter__ is user code.
    if issubclass(t, dict):
        return [(x, "%s[%s]" % (path, key(k))) for k, x in _plain(_copy(dict.items(v)))]
    if issubclass(t, list):
        return [(x, "%s[%d]" % (path, i)) for i, x in _plain(enumerate(_copy(list.__iter__(v))))]
    if issubclass(t, tuple):
        return [(x, "%s[%d]" % (path, i)) for i, x in _plain(enumerate(_copy(tuple.__iter__(v))))]
    if t.__name__ == "deque":
        return [(x, "%s[%d]" % (path, i)) for i, x in _plain(enumerate(_copy(v)))]
    if t is types.FunctionType:
        return _function(v, path, home)
    if t.__name__ == "_lru_cache_wrapper":
        return _lru_cache(v, path, home)
    if issubclass(t, type):
        return _class(v, path, home)
    if t in (staticmethod, classmethod):
        return [(v.__func__, path)]
    if t is types.CellType:
        try:
            return [(v.cell_contents, path)]
        except ValueError:  # an empty cell
            return []
    return [(x, "%s.%s" % (path, k)) for k, x in _attributes(w, v, t)]


def _copy(it):
    """At most MAX_ITEMS of an iterable, copied: another thread may change a
    container between two of our bytecodes."""
    try:
        return list(itertools.islice(it, MAX_ITEMS))
    except (RuntimeError, TypeError):
        return []


def _plain(pairs):
    """The (key, value) pairs whose value may hold a tensor; none at all when
    the first ATOM_PREFIX values are plain (a vocabulary, a list of ids)."""
    out = []
    for i, (k, x) in enumerate(pairs):
        if type(x) in _ATOM:
            if i >= ATOM_PREFIX and not out:
                break
            continue
        out.append((k, x))
    return out


def key(k, nested=0):
    """A container key as it reads in code, from builtin reprs only (user
    types' __repr__ never runs): 'k512', (16, 512, 4821), else the type's name."""
    t = type(k)
    if t in (int, float, bool, type(None)):
        return repr(k)
    if t is str:
        return repr(k if len(k) <= KEY_CHARS else k[:KEY_CHARS] + "...")
    n = tuple.__len__(k) if issubclass(t, tuple) else 0
    if n and nested < 2 and n <= 8:
        inner = ", ".join(key(x, nested + 1) for x in tuple.__iter__(k))
        return "(%s%s)" % (inner, "," if n == 1 else "")
    return t.__name__


def instance_dict(v, t):
    """v's own __dict__ through the C descriptor that holds it, or None: a
    __dict__ property of the class's own is never called."""
    for k in type.__getattribute__(t, "__mro__"):
        desc = type.__getattribute__(k, "__dict__").get("__dict__")
        if desc is not None:
            if type(desc) not in (types.GetSetDescriptorType, types.MemberDescriptorType):
                return None
            try:
                d = desc.__get__(v, t)
            except Exception:
                return None
            return d if type(d) is dict else None
    return None


def _attributes(w, v, t):
    """v's attributes from its instance dict and its slots, dunders left out."""
    out = []
    d = instance_dict(v, t)
    if d is not None:
        out.extend((k, x) for k, x in _copy(dict.items(d)) if type(k) is str and not k.startswith("__"))
    slots = w.slots.get(t)
    if slots is None:
        slots = w.slots[t] = [(name, desc) for k in type.__getattribute__(t, "__mro__")
                              for name, desc in list(type.__getattribute__(k, "__dict__").items())
                              if type(desc) is types.MemberDescriptorType and not name.startswith("__")]
    for name, desc in slots:
        try:
            out.append((name, desc.__get__(v, t)))
        except Exception:  # an unset slot
            pass
    return out


def attribute(v, name):
    """One attribute of v read as _attributes reads them, or None."""
    t = type(v)
    d = instance_dict(v, t)
    if d is not None and name in d:
        return d[name]
    for k in type.__getattribute__(t, "__mro__"):
        desc = type.__getattribute__(k, "__dict__").get(name)
        if type(desc) is types.MemberDescriptorType:
            try:
                return desc.__get__(v, t)
            except Exception:
                return None
    return None


def _function(f, path, home):
    """A function's closure cells ("make.<locals>.cache"), defaults and
    attributes (a cache set on the function, the function functools.wraps
    wrapped)."""
    out = []
    cells = f.__closure__ or ()
    for name, cell in zip(f.__code__.co_freevars, cells):
        out.append((cell, "%s.<locals>.%s" % (path, name)))
    for i, x in enumerate(f.__defaults__ or ()):
        out.append((x, "%s.__defaults__[%d]" % (path, i)))
    for k, x in (f.__kwdefaults__ or {}).items():
        out.append((x, "%s.__kwdefaults__[%s]" % (path, key(k))))
    for k, x in _copy(f.__dict__.items()):
        if type(k) is str and (k == "__wrapped__" or not k.startswith("__")):
            out.append((x, "%s.%s" % (path, k)))
    return out


def _lru_cache(f, path, home):
    """A functools.lru_cache's entries ("build_mask.<lru_cache>[(16, 512)]"):
    the C wrapper shows the garbage collector its cache dict (key -> result
    when unbounded) and, when bounded, each entry's key and result in turn."""
    d = instance_dict(f, type(f)) or {}
    out = [(d.get("__wrapped__"), path + ".__wrapped__")]
    try:
        refs = gc.get_referents(f)
    except Exception:
        return out
    where = path + ".<lru_cache>"
    keys = set()
    for r in refs:
        if type(r) is dict and r is not d:
            out.append((r, where))
            keys.update(id(k) for k in _copy(r))
    i = 0
    while i + 1 < len(refs):
        if id(refs[i]) in keys:
            out.append((refs[i + 1], "%s[%s]" % (where, key(refs[i]))))
            i += 2
        else:
            i += 1
    return out


def _class(cls, path, home):
    """A class's own attributes ("RotaryTable._tables")."""
    d = type.__getattribute__(cls, "__dict__")
    return [(x, "%s.%s" % (path, k)) for k, x in _copy(d.items()) if type(k) is str and not k.startswith("__")]


def _kv_cache(w, v, t, path):
    """The per-layer keys and values of a key/value cache, by one name
    whatever its layout: "<path>.layers[i].keys|values" for a transformers
    Cache (layers[i].keys / .values, or key_cache / value_cache lists) or any
    object whose class name ends with "Cache" laid out the same way;
    "<path>[i][0|1]" for legacy past_key_values tuples. None if v is none."""
    if issubclass(t, _SEQ):
        return _legacy_kv(w, v, path)
    layers = attribute(v, "layers")
    if type(layers) in (list, tuple):
        out = []
        for i, layer in enumerate(_copy(layers)):
            for a, b in _KV_ATTRS:
                k, x = attribute(layer, a), attribute(layer, b)
                if _is_tensor(w, k) or _is_tensor(w, x):
                    out += [(k, "%s.layers[%d].keys" % (path, i)), (x, "%s.layers[%d].values" % (path, i))]
                    break
        if out:
            return out
    for a, b in _KV_ATTRS:
        ks, xs = attribute(v, a), attribute(v, b)
        if type(ks) in (list, tuple) and type(xs) in (list, tuple) and any(_is_tensor(w, k) for k in ks):
            return ([(k, "%s.layers[%d].keys" % (path, i)) for i, k in enumerate(_copy(ks))]
                    + [(x, "%s.layers[%d].values" % (path, i)) for i, x in enumerate(_copy(xs))])
    return None


def _legacy_kv(w, v, path):
    """past_key_values as tuples: one (key, value[, cross key, cross value])
    tuple of 4-D tensors per layer, under a name that says so (past, present,
    cache: a list of (image, mask) pairs is not a cache)."""
    layers = _copy((list.__iter__ if issubclass(type(v), list) else tuple.__iter__)(v))
    if not layers or len(layers) > 4096 or type(layers[0]) is not tuple or not _KV_NAME.search(path):
        return None
    out = []
    for i, layer in enumerate(layers):
        if type(layer) is not tuple or len(layer) not in (2, 4):
            return None
        for j, x in enumerate(layer):
            shape = shape_of(x) if _is_tensor(w, x) else None
            if shape is None or len(shape) != 4:
                return None
            out.append((x, "%s[%d][%d]" % (path, i, j)))
    return out


def _is_tensor(w, x):
    return issubclass(type(x), w.torch.Tensor)


def shape_of(t):
    """A tensor's shape as a list of ints, or None."""
    try:
        return [int(n) for n in t.shape]
    except Exception:
        return None


# Tensors that own no device memory of their own: torch.compile's tracing
# stand-ins (asking a FakeTensor for its data pointer warns, and will raise).
_NOT_MEMORY = frozenset(("FakeTensor", "FunctionalTensor"))


def storage(t, cpu=False):
    """(device, storage address, bytes) of a CUDA tensor, else None; with cpu
    (the tests on a machine without a GPU; never the agent) of a CPU tensor
    too, whose device is -1."""
    try:
        if not (t.is_cuda or cpu) or type(t).__name__ in _NOT_MEMORY:
            return None
        try:
            st = t.untyped_storage()
        except AttributeError:  # torch 1.x: its TypedStorage has the same data_ptr() and nbytes()
            st = t.storage()
        ptr, n = int(st.data_ptr()), int(st.nbytes())
        dev = int(t.get_device())
    except Exception:
        return None
    return (dev, ptr, n) if ptr and n > 0 else None
