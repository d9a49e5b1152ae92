"""JSON for flame trees deeper than Python's recursion limit.

A flame tree nests one object and one list per frame: the engine keeps up to
4,096 frames of a stack (profiler.MaxStackDepth), and the json module's C
scanner and encoder recurse once per level, so a stack of 600 frames raised
RecursionError in ``%vramscope open``. loads and dumps use the json module
(fast) and fall back to the loops below, which keep their own stack, when it
gives up. The widget sends a deep tree as JSON text (tree_to_json), which the
browser parses without limit.
"""
import json
import re
from json.decoder import scanstring

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_CONSTANTS = {"true": True, "false": False, "null": None}

# Trees up to this depth go to the widget as JSON objects (what every
# notebook saved so far holds); deeper ones as text. ipywidgets and the
# kernel's message encoder walk state recursively, each level of a tree
# costing two calls, well within the default limit of 1,000 here.
WIDGET_DEPTH = 200


def loads(text):
    """json.loads, for any depth of nesting."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    try:
        return json.loads(text)
    except RecursionError:
        return _parse(text)


def dumps(obj):
    """Compact json.dumps, for any depth of nesting."""
    try:
        return json.dumps(obj, separators=(",", ":"))
    except RecursionError:
        return _encode(obj)


def depth(tree):
    """The depth of a flame tree ({root: node}, nodes' children in "c"), walked without recursion."""
    root = tree.get("root") if isinstance(tree, dict) else None
    deepest, stack = 0, [(root, 1)] if root else []
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in node.get("c") or ())
    return deepest


def tree_to_json(tree, _widget=None):
    """The widget's `tree` on the wire: the tree itself, or its JSON text when it is deeper than WIDGET_DEPTH."""
    if depth(tree) <= WIDGET_DEPTH:
        return tree
    return dumps(tree)


def _parse(s):
    """Parses JSON text with an explicit stack of open containers."""
    ws = _WS.match
    stack = []  # [container, key]: key is None for a list
    i = ws(s, 0).end()
    while True:
        value, i, opened = _value(s, i)
        if opened is not None:
            stack.append(opened)
            continue
        while True:  # value is complete: add it to its container, closing those that end
            if not stack:
                if ws(s, i).end() != len(s):
                    raise ValueError("extra data at character %d" % i)
                return value
            top = stack[-1]
            if top[1] is None:
                top[0].append(value)
            else:
                top[0][top[1]] = value
            i = ws(s, i).end()
            c = s[i:i + 1]
            if c == ",":
                i = ws(s, i + 1).end()
                if top[1] is not None:
                    top[1], i = _key(s, i)
                break
            if c != ("]" if top[1] is None else "}"):
                raise ValueError("expected , or a closing bracket at character %d" % i)
            value, i = top[0], i + 1
            stack.pop()


def _value(s, i):
    """The value at i: (value, end, None), or (None, start of its first item, [container, key]) for a non-empty one."""
    ws = _WS.match
    c = s[i:i + 1]
    if c in ("{", "["):
        j = ws(s, i + 1).end()
        close = "}" if c == "{" else "]"
        if s[j:j + 1] == close:
            return ({} if c == "{" else []), j + 1, None
        if c == "[":
            return None, j, [[], None]
        key, j = _key(s, j)
        return None, j, [{}, key]
    if c == '"':
        v, end = scanstring(s, i + 1)
        return v, end, None
    for word, v in _CONSTANTS.items():
        if s.startswith(word, i):
            return v, i + len(word), None
    m = _NUMBER.match(s, i)
    if not m or m.end() == i:
        raise ValueError("expected a value at character %d" % i)
    text = m.group(0)
    return (float(text) if m.group(1) or m.group(2) else int(text)), m.end(), None


def _key(s, i):
    """An object's key at i and the position of its value."""
    if s[i:i + 1] != '"':
        raise ValueError("expected a key at character %d" % i)
    key, i = scanstring(s, i + 1)
    i = _WS.match(s, i).end()
    if s[i:i + 1] != ":":
        raise ValueError("expected : at character %d" % i)
    return key, _WS.match(s, i + 1).end()


def _encode(obj):
    """Encodes with an explicit stack: items are values to write or (raw) text."""
    out, todo = [], [(False, obj)]
    while todo:
        raw, v = todo.pop()
        if raw:
            out.append(v)
        elif isinstance(v, dict):
            items = list(v.items())
            todo.append((True, "}"))
            for n in range(len(items) - 1, -1, -1):
                todo.append((False, items[n][1]))
                todo.append((True, ("," if n else "") + json.dumps(str(items[n][0])) + ":"))
            out.append("{")
        elif isinstance(v, (list, tuple)):
            todo.append((True, "]"))
            for n in range(len(v) - 1, -1, -1):
                todo.append((False, v[n]))
                if n:
                    todo.append((True, ","))
            out.append("[")
        else:
            out.append(json.dumps(v))
    return "".join(out)
