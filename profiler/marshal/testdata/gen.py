"""Writes the small VSM1 streams and marshal payloads the tests read (python3 gen.py).

Each .vsm is written by jupyter/vramscope/agent/_vsm.py; marshal_v*.bin hold one dict
of every plain type, as marshal.dumps writes it in versions 0 to 4.
"""
import marshal
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "jupyter"))
from vramscope.agent._vsm import write_vsm  # noqa: E402


def frame(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


def snapshot():
    """A miniature snapshot: two devices, shared frames and stacks, one empty trace."""
    f1, f2 = frame("train.py", 23, "step"), frame("torch/nn/linear.py", 125, "forward")
    stack = [f2, f1]
    seg = {"device": 0, "address": 1 << 40, "total_size": 2 << 20, "allocated_size": 512,
           "active_size": 512, "requested_size": 500, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": stack,
           "blocks": [{"address": 1 << 40, "size": 512, "requested_size": 500,
                       "state": "active_allocated", "frames": stack},
                      {"address": (1 << 40) + 512, "size": (2 << 20) - 512, "state": "inactive", "frames": []}]}

    def entry(action, addr, size, t, frames):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                "compile_context": "N/A", "user_metadata": "", "frames": frames}
    dev0 = [entry("alloc", 1 << 40, 512, 1000 + i, stack if i % 2 else [f1]) for i in range(5)]
    dev0.append(entry("free_requested", 1 << 40, 512, 2000, stack))
    dev1 = [entry("segment_alloc", 2 << 40, 20 << 20, 3000, []), entry("oom", 0, 1 << 34, 3001, [])]
    dev1[1]["device_free"] = 1 << 20
    return {"segments": [seg], "device_traces": [dev0, [], dev1],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                   "expandable_segments": True, "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0},
            "external_annotations": [{"stage": "START", "name": "step_0", "device": 0, "time_us": 999}]}


def values(frozensets=True):
    """Every plain type marshal writes, with a shared list and a shared str."""
    shared = [1, 2]
    s = "shared string"
    return {
        "none": None, "bools": [True, False],
        "ints": [0, 1, -1, 255, 2**31 - 1, -2**31, 2**31, 2**60 - 1, 2**60, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**100],
        "floats": [1.5, -0.0, float("inf"), -float("inf"), 1e-310, 2.5e300],
        "bytes": b"\x00\xffbytes",
        "strs": ["ascii", "caf\u00e9", "\u4e2d\u6587", "\U0001F600", "x" * 300, "\ud800"],
        "tuples": [(), (1,), (1, (2, 3)), tuple(range(300))],
        "dict keys": {1: "int", (1, "a"): "tuple", 2.5: "float", None: "none", b"k": "bytes"},
        "sets": [{1, 2, 3}, {(2, 3)}, {"a"}, set()],
        "shared": [shared, shared, s, s],
        "nested": [[[[]]], {"a": {"b": {}}}],
    } | ({"frozensets": [frozenset({"b"}), frozenset(), {frozenset({1}): "key"}]} if frozensets else {})


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":  # set and frozenset order: the same bytes on every run
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    with open(os.path.join(HERE, "small.vsm"), "wb") as f:
        write_vsm(snapshot(), f, chunk_entries=2)
    with open(os.path.join(HERE, "values.vsm"), "wb") as f:  # the pickle writer has no frozenset
        write_vsm({"values": values(frozensets=False)}, f)
    with open(os.path.join(HERE, "frozenset.vsm"), "wb") as f:
        write_vsm({"values": {"frozensets": [frozenset({"b"})]}}, f)
    with open(os.path.join(HERE, "no_traces.vsm"), "wb") as f:
        write_vsm({"segments": []}, f)
    for v in range(5):
        with open(os.path.join(HERE, "marshal_v%d.bin" % v), "wb") as f:
            f.write(marshal.dumps(values(), v))


if __name__ == "__main__":
    main()
