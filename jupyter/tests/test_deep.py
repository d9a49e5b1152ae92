"""Stacks deeper than Python's recursion limit: `%vramscope open` of a
snapshot with a 600-frame stack raised RecursionError (the json module
recursed once per level of the flame tree, reading the engine's output and
sending the widget's state)."""
import json
import pickle

import pytest

from conftest import require_module
from vramscope.notebook import _deepjson, _engine


def deep_snapshot(path, depth):
    """A snapshot of one allocation whose stack is depth frames of f (as a
    runaway recursion records it)."""
    f = {"name": "f", "filename": "a.py", "line": 1}
    entry = {"action": "alloc", "addr": 0, "size": 512, "stream": 0, "time_us": 1, "frames": [f] * depth}
    with open(path, "wb") as out:
        pickle.dump({"segments": [], "device_traces": [[entry]]}, out, protocol=4)
    return str(path)


def nested(depth):
    """A flame tree of depth frames in a chain, as the engine writes one."""
    root = node = {"n": "all", "v": 512}
    for i in range(depth):
        child = {"n": "f%d" % i, "f": "a.py", "l": i, "v": 512}
        node["c"] = [child]
        node = child
    return {"title": "t", "root": root}


def test_deepjson_matches_json_and_goes_deeper():
    """loads and dumps agree with the json module where it works, and go on
    where it raises RecursionError."""
    docs = [{"a": [1, -2.5e-3, "x\u00e9\"\\", None, True, False, {}, []], "": {"b": [[[]]]}}, [], "s", 0, nested(5)]
    for doc in docs:
        text = json.dumps(doc)
        assert _deepjson._parse(text) == json.loads(text)
        assert json.loads(_deepjson._encode(doc)) == doc
    deep = nested(5000)
    with pytest.raises(RecursionError):
        json.loads(_deepjson._encode(deep))
    text = _deepjson.dumps(deep)
    assert _deepjson.depth(_deepjson.loads(text)) == 5001
    for bad in ['{"a":1', '[1,]', '{"a" 1}', '[1 2]', '{"a":1}x', 'nul']:
        with pytest.raises(ValueError):
            _deepjson._parse(bad)


@pytest.mark.parametrize("frames", [600, 5000])
def test_open_deep_stack(tmp_path, frames):
    """The engine's bundle of a deep stack reads, and the report widget's
    state encodes as the kernel sends it: the tree as JSON text once it is
    deeper than WIDGET_DEPTH, which parses back to the same tree."""
    require_module("anywidget")
    from jupyter_client.session import json_packer

    from vramscope import notebook

    snap = deep_snapshot(tmp_path / "deep.pickle", frames)
    _, tree = _engine.analyze_and_flame(snap)
    want = min(frames, 4096) + 1  # the engine keeps 4,096 frames (profiler.MaxStackDepth), under a root
    assert _deepjson.depth(tree) == want
    w = notebook.open(snap)
    state = w.get_state()
    assert isinstance(state["tree"], str)
    json_packer(state)
    # (== on trees this deep recurses too: compare their encodings)
    assert _deepjson.dumps(_deepjson.loads(state["tree"])) == _deepjson.dumps(w.tree)


def test_shallow_tree_stays_an_object():
    """Trees as deep as real stacks go to the widget as objects, as every saved notebook holds them."""
    tree = nested(50)
    assert _deepjson.tree_to_json(tree) is tree
    assert _deepjson.depth(nested(_deepjson.WIDGET_DEPTH)) == _deepjson.WIDGET_DEPTH + 1  # the root above
    assert isinstance(_deepjson.tree_to_json(nested(_deepjson.WIDGET_DEPTH)), str)
