"""Names for the CUDA tensors alive in the process, keyed by storage address.

Between two recorded windows (the default, sampled mode) the allocator keeps
no stack for most live blocks, so a snapshot alone cannot say what filled the
device. What Python can still see can: at an out-of-memory error (in the
observer, on the failing thread, the GIL held) and for a snapshot the daemon
asks for, the agent walks

- the nn.Modules and optimizers the garbage collector knows: parameters and
  buffers (persistent or not) by module path
  (``model.transformer.h.3.mlp.c_fc.weight``), their ``.grad``, optimizer
  state by parameter (``exp_avg of ...``), tensors kept in a module's other
  attributes (caches);
- the Python stack of every thread: tensors held by locals (``logits in
  forward (modeling_gpt2.py:702)``), one level into lists, tuples and dicts;
- the autograd graph reachable from those tensors: activations saved for
  backward, named by the node that saved them and the module whose
  parameters (trainable or frozen) the node or the nodes below it used;
- then, only while some CUDA tensor the garbage collector knows is still
  unnamed, what holds it however deep (_holders.py): objects nested in locals
  and module attributes (``cache.layers[3].k in main (serve.py:40)``), and the
  module-level globals of every imported module: dicts, lists, objects,
  class attributes, closures' cells, functools.lru_cache entries
  (``masks._CACHE[(16, 512, 4821)]``, ``pos.Rotary._tables[(1024, 1.0)]``,
  ``masks.build.<lru_cache>[(16, 512)]``, ``masks.make.<locals>.cache[3]``),
  with the file and line where the global is defined.

Key/value caches (contract with the inference findings, issue #27): wherever
a cache is reached (locals, module attributes, globals, nested), a
``transformers`` Cache (``layers[i].keys``/``.values``, or
``key_cache``/``value_cache`` lists; DynamicCache, StaticCache, ...) or any
object whose class name ends with "Cache" laid out the same way gives entries
of kind "kv_cache" named ``<holder path>.layers[<i>].keys`` and
``...values``; legacy ``past_key_values`` tuples (one (k, v) tuple of 4-D
tensors per layer, under a name with past, present or cache in it) give
``<holder path>[<i>][0]`` and ``[1]``. Every entry carries the shape of the
tensor that named it (kv_cache: [batch, heads, seq, head_dim]).

The result: {"version", "took_ms", "truncated", "objects", "routes",
"entries": [[device, storage address, bytes, kind, name, module, file, line,
shape], ...], "methods": [...]} (shape: a list of ints, or None; device: the
CUDA device's index, or -1 for a CPU tensor, which only the tests have named:
name_tensors(cpu=True)).

Each CUDA tensor's storage pointer is the address of its allocator block, so
the analysis matches names to blocks exactly. Where one storage has several
names the most specific kind wins (KINDS: a parameter over a local that
refers to it); a local that the graph also saves for backward keeps its
local name and becomes an "activation". The walk is bounded in time
(BUDGET_S) and entries; what it could not finish is marked ``truncated``. It
never raises: the caller is torch's OOM observer, which must not mask the
user's OutOfMemoryError. Nothing of it runs during training steps.

Measured on the H200 (docs/oom-naming.md).
"""
import gc
import os
import re
import sys
import time
import types
import weakref

from . import _autograd, _globals, _holders

VERSION = 1
BUDGET_S = 2.0          # at most this long in one walk
MAX_ENTRIES = 200000    # named storages kept
MAX_METHODS = 4096      # module classes whose forward is located
MAX_METHOD_PATHS = 64   # module paths kept per class (layers grouped)
_LAYER = re.compile(r"\.\d+(?=\.|$)")
_CHECK_EVERY = 4096     # objects between two looks at the clock

# When one storage has several names, the first kind in this order wins.
KINDS = ("parameter", "buffer", "gradient", "optimizer_state", "kv_cache", "attribute", "global", "local",
         "activation")
_RANK = {k: i for i, k in enumerate(KINDS)}

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # all of vramscope


def _is(v, cls):
    """isinstance() by type alone: isinstance also asks an object for its
    __class__, which runs code in lazy proxies (one of torch's own warns)."""
    return issubclass(type(v), cls)


class _Walk:
    """One walk: the names found so far, by storage pointer."""

    def __init__(self, torch, budget_s, cpu=False):
        self.torch = torch
        self.cpu = cpu          # CPU tensors named too (name_tensors)
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + budget_s
        self.by_ptr = {}
        self.truncated = False
        self.routes = {}
        self.ticks = 0
        self.errors = 0         # objects the holder walk could not read (and went past)
        self.slots = {}         # class -> its slots' (name, descriptor), for the holder walk
        self.param_names = {}   # id(parameter) -> (name, module path)
        self.saved_attrs = {}   # graph node class -> its _saved_* attribute names
        self.module_paths = []  # (path, module) of every module walked
        self.param_shapes = {}  # a parameter's shape (and a matrix's transposed) -> module paths
        self.remaining = set()  # storages of CUDA tensors the garbage collector knows, not named yet
        self.skip = (types.ModuleType,)  # and modules and optimizers (name_tensors): named by their own routes
        self.methods = {}       # module class -> [file, first line, last line, qualname] of its forward

    def tick(self):
        self.ticks += 1
        if self.ticks % _CHECK_EVERY == 0 and time.perf_counter() > self.deadline:
            raise _holders.OutOfTime()

    def add(self, t, kind, name, module="", file="", line=0):
        """Name tensor t's storage, if it is on a CUDA device (or the walk
        names CPU tensors too); the entry's row when this name is the one kept."""
        st = _holders.storage(t, self.cpu)
        if st is None:
            return None
        dev, ptr, n = st
        old = self.by_ptr.get(ptr)
        if old is not None and (_RANK[old[3]] <= _RANK[kind] or (kind, old[3]) == ("local", "activation")):
            if kind == "activation" and old[3] == "local":
                old[3] = "activation"  # a local that backward needs: keep its name, say what it is
                old[5] = old[5] or module
            return None
        if old is None and len(self.by_ptr) >= MAX_ENTRIES:
            self.truncated = True
            return None
        row = self.by_ptr[ptr] = [dev, ptr, n, kind, name, module, file, int(line), _holders.shape_of(t)]
        self.routes[kind] = self.routes.get(kind, 0) + 1
        self.remaining.discard(ptr)
        return row

    def result(self, objects):
        if self.errors:
            self.routes["unreadable"] = self.errors
        return {"version": VERSION, "took_ms": round((time.perf_counter() - self.t0) * 1000.0, 3),
                "truncated": self.truncated, "objects": objects, "routes": dict(self.routes),
                "entries": list(self.by_ptr.values()), "methods": self.method_list()}

    def method(self, cls, path):
        """Record cls's forward (once per class) and the module path of this
        instance, layers read as "*" ("model.transformer.h.*.attn")."""
        self._locate(cls)
        row = self.methods.get(id(cls))
        if row is not None:
            grouped = _LAYER.sub(".*", path)
            if grouped not in row[4] and len(row[4]) < MAX_METHOD_PATHS:
                row[4].append(grouped)

    def _locate(self, cls):
        """Where cls's forward is (file and lines) and its qualified name:
        PyTorch's frames carry only "forward", so the engine labels a frame
        inside these lines "GPT2Attention.forward". Once per class."""
        key = id(cls)
        if key in self.methods or len(self.methods) >= MAX_METHODS:
            return
        self.methods[key] = None
        try:
            # The class dicts along the MRO, not getattr: a descriptor's code never runs.
            dicts = (type.__getattribute__(k, "__dict__") for k in type.__getattribute__(cls, "__mro__"))
            fn = next((d["forward"] for d in dicts if "forward" in d), None)
            fn = _unwrapped(fn)
            if fn is None or fn.__code__.co_name != "forward":
                return  # not a function, or nn.Module's _forward_unimplemented (ModuleList)
            code = fn.__code__
            first = int(code.co_firstlineno)
            last = max((ln for _, _, ln in code.co_lines() if ln), default=first)
            qual = fn.__qualname__
            if _is(qual, str) and "<" not in qual:
                self.methods[key] = [code.co_filename, first, int(last), qual, []]
        except Exception:  # no code object (a builtin), or an older Python
            pass

    def method_list(self):
        return [m for m in self.methods.values() if m is not None]


def _unwrapped(fn):
    """The function a decorated forward wraps (functools.wraps' __wrapped__:
    transformers wraps GPT2Model.forward in utils/generic.py, whose lines are
    not the ones the frames run), read from the function's own __dict__ so no
    descriptor runs; None when fn is not a plain function."""
    for _ in range(8):
        if type(fn) is not types.FunctionType:
            return None
        inner = fn.__dict__.get("__wrapped__")
        if inner is None:
            return fn
        fn = inner
    return fn if type(fn) is types.FunctionType else None


def name_tensors(torch, budget_s=BUDGET_S, cpu=False):
    """Walk what Python can see and return the names of CUDA tensor storages
    (the ``vramscope_tensors`` entry of a snapshot), or None when torch is
    unusable. Never raises. cpu: name CPU tensors too, as device -1, by the
    same routes: the tests of each route on a machine without a GPU
    (tests/test_tensors_torch.py); the agent never sets it."""
    try:
        w = _Walk(torch, budget_s, cpu)
    except Exception:
        return None
    objects = 0
    try:
        modules, optims, tensors = _gc_objects(w, torch)
        w.skip = (torch.nn.Module, torch.optim.Optimizer, types.ModuleType)
        objects = w.ticks
        roots = _root_names(modules)
        _modules(w, modules, roots)
        _optimizers(w, optims)
        graph_roots = _weak(_stacks(w))
        graph_roots.extend(r for r in tensors if getattr(r(), "grad_fn", None) is not None)
        live = _alive(graph_roots)
        _autograd.activations(w, live)
        del live
        _unnamed(w, _alive(tensors))
        if w.remaining:
            _globals.holders(w, _frames())
    except _holders.OutOfTime:
        w.truncated = True
    except Exception as e:  # a torch we do not know: keep what was named
        w.truncated = True
        w.routes["error"] = "%s: %s" % (type(e).__name__, e)
    return w.result(objects)


def _gc_objects(w, torch):
    """The modules, optimizers and tensors among the garbage collector's
    objects; the tensors as weak references: the walk runs beside the user's
    step, and a list holding every tensor alive would keep that step's
    temporaries alive until it ends. Near a cap that is an OOM the job would
    not have had: on the H200 a GPT-2 loop's warning snapshot held 190 MiB of
    one step's activations and the job failed 0.4 s later, 240 steps early
    (docs/oom-warning.md)."""
    module_cls, optim_cls, tensor_cls = torch.nn.Module, torch.optim.Optimizer, torch.Tensor
    modules, optims, tensors = [], [], []
    for o in gc.get_objects():
        w.tick()
        t = type(o)  # one type() for three checks, as _is() does
        if issubclass(t, tensor_cls):
            try:
                tensors.append(weakref.ref(o))
            except TypeError:  # a tensor type without weak references: not held either
                pass
        elif issubclass(t, module_cls):
            modules.append(o)
        elif issubclass(t, optim_cls):
            optims.append(o)
    return modules, optims, tensors


def _weak(objs):
    """Weak references to objs (those that take one)."""
    out = []
    for o in objs:
        try:
            out.append(weakref.ref(o))
        except TypeError:
            pass
    return out


def _alive(refs):
    """The objects of refs still alive."""
    return [o for o in (r() for r in refs) if o is not None]


def _root_names(modules):
    """A name for each top-level module: the variable that holds it in a frame
    of any thread or in __main__, else its class name."""
    children = set()
    for m in modules:
        for c in (getattr(m, "_modules", None) or {}).values():
            if c is not None:
                children.add(id(c))
    roots = {id(m): m for m in modules if id(m) not in children}
    names = {}
    scopes = []
    main = sys.modules.get("__main__")
    if main is not None:
        scopes.append(getattr(main, "__dict__", {}))
    for f in _frames():
        try:
            scopes.append(f.f_locals)
        except Exception:
            pass
    for scope in scopes:
        try:
            items = list(scope.items())
        except Exception:
            continue
        for k, v in items:
            if id(v) in roots and id(v) not in names and _is(k, str) and not k.startswith("_"):
                names[id(v)] = k
    return [(names.get(i) or type(m).__name__, m) for i, m in roots.items()]


def _modules(w, modules, roots):
    """Parameters, buffers, their gradients and other tensor attributes, by module path."""
    done = set()
    for root_name, root in roots:
        stack = [(root_name, root)]
        while stack:
            path, m = stack.pop()
            if id(m) in done:
                continue
            done.add(id(m))
            w.tick()
            w.method(type(m), path)
            w.module_paths.append((path, m))
            for k, p in list((getattr(m, "_parameters", None) or {}).items()):
                if p is None:
                    continue
                name = "%s.%s" % (path, k)
                w.param_names.setdefault(id(p), (name, path))
                _autograd.index_shape(w, p, path, m)
                w.add(p, "parameter", name, path)
                g = getattr(p, "grad", None)
                if g is not None:
                    w.add(g, "gradient", name + ".grad", path)
            for k, b in list((getattr(m, "_buffers", None) or {}).items()):
                if b is not None:
                    w.add(b, "buffer", "%s.%s" % (path, k), path)
            site, seen = _holders.Site("attribute", module=path), set()
            if type(m).__name__.endswith("Cache"):  # a key/value cache that is a module (transformers 4.46)
                _holders.reach(w, m, path, site, seen, depth=1)
            for k, v in list(getattr(m, "__dict__", {}).items()):
                if k.startswith("_") or k == "training":
                    continue
                _holders.reach(w, v, "%s.%s" % (path, k), site, seen, depth=1)
            for k, c in list((getattr(m, "_modules", None) or {}).items()):
                if c is not None:
                    stack.append(("%s.%s" % (path, k), c))


def _optimizers(w, optims):
    """Optimizer state by parameter: "exp_avg of model.lm_head.weight"."""
    tensor_cls = w.torch.Tensor
    for i, opt in enumerate(optims):
        state = getattr(opt, "state", None) or {}
        try:
            items = list(state.items())
        except Exception:
            continue
        for p, st in items:
            w.tick()
            pname, module = w.param_names.get(id(p), ("", ""))
            if not pname:
                pname = "a parameter of optimizer %d (%s)" % (i, type(opt).__name__)
            if not _is(st, dict):
                continue
            for k, v in list(st.items()):
                if _is(v, tensor_cls):
                    w.add(v, "optimizer_state", "%s of %s" % (k, pname), module)


def _frames():
    """Every thread's frames without vramscope's own: innermost first, and
    torch's own frames (module call wrappers, whose args hold the same
    tensors under less telling names) after all others."""
    own, lib = [], []
    try:
        tops = list(sys._current_frames().values())
    except Exception:
        return own
    for f in tops:
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith(_PKG):
                (lib if (os.sep + "torch" + os.sep) in fn else own).append(f)
            f = f.f_back
    return own + lib


def _stacks(w):
    """Tensors held by locals of every thread's frames (one level into
    containers, and key/value caches); returns the tensors with an autograd
    history, roots of the graph walk."""
    roots, seen = [], set()
    for f in _frames():
        w.tick()
        local = _holders.frame_locals(f, roots)
        if local is None:
            continue
        site, items = local
        for k, v in items:
            if _is(k, str):
                _holders.reach(w, v, k, site, seen, depth=1)
    return roots


def _unnamed(w, tensors):
    """The storages of the garbage collector's CUDA tensors still unnamed:
    what the holder walk looks for (and stops once all are found)."""
    for t in tensors:
        w.tick()
        st = _holders.storage(t, w.cpu)
        if st is not None and st[1] not in w.by_ptr:
            w.remaining.add(st[1])
