"""The tensor walk's activations (see _tensors.py): what the autograd graph
saved for backward, named by the node that saved it and the module whose
forward made it, told from the graph alone (no hook runs during training):
the module of a parameter a node saved, accumulates a gradient into or saved
a cast copy of, else that of the nodes it takes its inputs from."""
import re

from . import _holders

_LAYER = re.compile(r"\.\d+(?=\.|$)")
MAX_PATHS_A_SHAPE = 1024  # modules kept per parameter shape
# Nodes that only transpose, reshape or cast a weight on its way to a matmul.
_WRAPPERS = frozenset(("TBackward0", "ToCopyBackward0", "TransposeBackward0", "PermuteBackward0",
                       "ViewBackward0", "ReshapeAliasBackward0", "ExpandBackward0", "UnsqueezeBackward0"))


def index_shape(w, p, path, module):
    """Index parameter p's module by the shape a matmul saves it in: under
    autocast a matmul saves a cast copy of a frozen weight, which has its
    shape but not its storage. nn.Linear's weight is used transposed
    (F.linear: input @ weight.T), any other (transformers' Conv1D) as is."""
    shape = _holders.shape_of(p)
    if not shape or len(shape) < 2:
        return
    linear = getattr(getattr(w.torch, "nn", None), "Linear", None)
    if linear is not None and issubclass(type(module), linear):
        shape = list(reversed(shape))
    paths = w.param_shapes.setdefault(tuple(shape), [])
    if len(paths) < MAX_PATHS_A_SHAPE:
        paths.append(path)


def activations(w, tensors):
    """Activations saved for backward in the autograd graph reachable from the
    given tensors: named by the node that saved them, and by the module whose
    parameters the node used: one it saved (a frozen weight is saved by the
    matmul that used it, though it has no AccumulateGrad), accumulates a
    gradient into, or saved a cast copy of (autocast), else the module of the
    nodes below it (the GELU after an MLP's input projection is that
    projection's)."""
    module_of, named = {}, 0
    for fn in _postorder(w, tensors):  # every node after the nodes it takes inputs from
        saved = _saved(w, fn)
        below = next((module_of[id(n)] for n, _ in _nexts(fn) if module_of.get(id(n))), "")
        mod = _own_module(w, fn, saved) or _cast_weight_module(w, saved, below) or below
        module_of[id(fn)] = mod
        if not saved:
            continue
        try:
            node = fn.name()
        except Exception:
            node = type(fn).__name__
        name = "saved by %s%s" % (node, (" in " + mod) if mod else "")
        for v in saved:
            w.add(v, "activation", name, mod)
            named += 1
    return named


def _nexts(fn):
    try:
        return [(n, i) for n, i in fn.next_functions if n is not None]
    except Exception:
        return []


def _postorder(w, tensors):
    """The graph's nodes, each after all the nodes it takes inputs from."""
    order, done = [], set()
    stack = [(t.grad_fn, False) for t in tensors]
    while stack:
        fn, expanded = stack.pop()
        if fn is None:
            continue
        if expanded:
            order.append(fn)
            continue
        if id(fn) in done:
            continue
        w.tick()
        done.add(id(fn))
        stack.append((fn, True))
        stack.extend((n, False) for n, _ in _nexts(fn) if id(n) not in done)
    return order


def _saved(w, fn):
    """The tensors a graph node saved for backward (none once a backward freed them)."""
    attrs = w.saved_attrs.get(type(fn))
    if attrs is None:
        attrs = w.saved_attrs[type(fn)] = [a for a in dir(fn) if a.startswith("_saved_")]
    out = []
    for a in attrs:
        try:
            v = getattr(fn, a)
        except Exception:  # freed by an earlier backward
            continue
        if issubclass(type(v), w.torch.Tensor):
            out.append(v)
        elif issubclass(type(v), (list, tuple)):
            out.extend(x for x in v if issubclass(type(x), w.torch.Tensor))
    return out


def _own_module(w, fn, saved):
    """The module of a parameter the node saved (by storage) or accumulates
    a gradient into, else ""."""
    for v in saved:
        st = _holders.storage(v, w.cpu)
        row = w.by_ptr.get(st[1]) if st is not None else None
        if row is not None and row[3] == "parameter":
            return row[5]
    for n, _ in _nexts(fn):
        var = _parameter_below(n)
        if var is not None and id(var) in w.param_names:
            return w.param_names[id(var)][1]
    return ""


def _parameter_below(n, hops=3):
    """The parameter whose AccumulateGrad node n is, or that n reaches
    through a chain of one-input nodes (a transpose, autocast's cast of a
    trainable weight: TBackward0 -> ToCopyBackward0 -> AccumulateGrad)."""
    for _ in range(hops):
        var = getattr(n, "variable", None)
        if var is not None:
            return var
        try:
            wrapper = n.name() in _WRAPPERS
        except Exception:
            return None
        nexts = _nexts(n)
        if not wrapper or len(nexts) != 1:
            return None
        n = nexts[0][0]
    return getattr(n, "variable", None)


def _cast_weight_module(w, saved, below):
    """The module whose weight a node saved as a cast copy (autocast casts a
    frozen weight anew each forward): a saved tensor outside the graph (no
    grad required) with a parameter's shape. Of the modules with that shape,
    the one sharing the longest path with the module below the node (layer
    3's c_fc after layer 3's ln_2); "" when none or no single one."""
    for v in saved:
        if getattr(v, "requires_grad", True):
            continue
        shape = _holders.shape_of(v)
        paths = w.param_shapes.get(tuple(shape)) if shape and len(shape) >= 2 else None
        if paths:
            return _nearest(paths, below)
    return ""


def _nearest(paths, below):
    """The path among paths sharing the most leading parts with below; of
    several, one if they are the same module in other layers, else ""."""
    want = below.split(".")

    def shared(p):
        n = 0
        for a, b in zip(p.split("."), want):
            if a != b:
                break
            n += 1
        return n
    best = max(shared(p) for p in paths)
    top = [p for p in paths if shared(p) == best]
    return top[0] if len({_LAYER.sub(".*", p) for p in top}) == 1 else ""
