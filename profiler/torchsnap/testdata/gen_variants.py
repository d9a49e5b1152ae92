#!/usr/bin/env python3
"""Derives the snapshot layouts the real recordings do not cover from the small
example snapshots in examples/snapshots, and writes them here:

  legacy_history.pickle   the PyTorch 2.0 layout: blocks without "address",
                          "requested_size" or "frames", carrying
                          history: [{addr, real_size, frames}] (newest first);
                          segments without the 2.1 keys; no device_traces.
                          Derived from expandable.pickle.
  multi_device.pickle     devices 0 and 2 active, device 1 present with an
                          EMPTY trace between them: segments copied to device 2
                          at shifted addresses, trace copied likewise (protocol 2,
                          so BINPUT/LONG_BINPUT memo forms reach the decoder too).
                          Derived from leak_steps.pickle.
  first_trace_empty.pickle
                          device 0's trace is empty, device 1's is not: trace
                          number 0 belongs to device 1. From cuda_graph.pickle.
  variants.pickle         optional keys left out (frames, compile_context,
                          user_metadata, segment_pool_id, block frames), unknown
                          keys added at every level, None stream/time, an
                          "oom" entry, the older "free" action name, and one
                          2,500-frame stack (its frames list is written in
                          several APPENDS batches). Protocol 5. From cuda_graph.
  bare_segments.pickle    torch 1.x memory_snapshot(): a bare list of segments.
  traces_only.pickle      a dict with device_traces and no segments.

Run from anywhere:  python3 profiler/torchsnap/testdata/gen_variants.py
The output is deterministic.
"""

import copy
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples", "snapshots")


def load(name):
    with open(os.path.join(EXAMPLES, name), "rb") as f:
        return pickle.load(f)


def write(name, obj, protocol=4):
    with open(os.path.join(HERE, name), "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def legacy_history():
    d = load("expandable.pickle")
    segments = []
    first_active_done = False
    no_history_done = False
    older = [{"filename": "/workspace/old_alloc.py", "line": 7, "name": "older_allocation"}]
    for s in d["segments"]:
        blocks = []
        for b in s["blocks"]:
            nb = {"size": b["size"], "state": b["state"]}
            if b["state"] != "inactive":
                if not no_history_done and first_active_done:
                    # Allocated before history recording began: no history.
                    no_history_done = True
                else:
                    # Requests are rounded up to the block size: make them differ.
                    real = b["requested_size"] - 100 * (len(blocks) + 1)
                    history = [{"addr": b["address"], "real_size": real, "frames": b.get("frames", [])}]
                    if not first_active_done:
                        # The block also served an older, smaller allocation from
                        # elsewhere; history lists the newest allocation first.
                        history.append({"addr": b["address"], "real_size": real // 2, "frames": older})
                        first_active_done = True
                    nb["history"] = history
            blocks.append(nb)
        segments.append({
            "device": s["device"],
            "address": s["address"],
            "total_size": s["total_size"],
            "allocated_size": s["allocated_size"],
            "active_size": s["active_size"],
            "stream": s["stream"],
            "segment_type": s["segment_type"],
            "blocks": blocks,
        })
    write("legacy_history.pickle", {"segments": segments})


SHIFT = 1 << 40


def multi_device():
    d = load("leak_steps.pickle")
    segs2 = []
    for s in d["segments"]:
        c = copy.copy(s)
        c["device"] = 2
        c["address"] = s["address"] + SHIFT
        c["blocks"] = []
        for b in s["blocks"]:
            nb = copy.copy(b)  # frames lists stay shared, as in a real snapshot
            nb["address"] = b["address"] + SHIFT
            c["blocks"].append(nb)
        segs2.append(c)
    trace2 = []
    for e in d["device_traces"][0]:
        ne = copy.copy(e)
        if "addr" in ne:
            ne["addr"] = e["addr"] + SHIFT
        trace2.append(ne)
    anns2 = []
    for a in d["external_annotations"]:
        na = dict(a)
        na["device"] = 2
        na["time_us"] = a["time_us"] + 1
        anns2.append(na)
    out = {
        "segments": d["segments"] + segs2,
        "device_traces": [d["device_traces"][0], [], trace2],
        "allocator_settings": d["allocator_settings"],
        "external_annotations": d["external_annotations"] + anns2,
    }
    write("multi_device.pickle", out, protocol=2)


def first_trace_empty():
    d = load("cuda_graph.pickle")
    for s in d["segments"]:
        s["device"] = 1
    d["device_traces"] = [[], d["device_traces"][0]]
    write("first_trace_empty.pickle", d)


def variants():
    d = load("cuda_graph.pickle")
    trace = d["device_traces"][0]
    for i, e in enumerate(trace):
        e.pop("compile_context", None)
        e.pop("user_metadata", None)
        if i % 3 == 1:
            e.pop("frames", None)
        if i % 4 == 2:
            e["future_key"] = {"nested": [1, 2, {"deeper": None}], "t": (1, 2)}
        if i % 5 == 3:
            e["user_metadata"] = "step %d" % i
    trace[0]["stream"] = None
    trace[1]["time_us"] = None
    for e in trace:
        if e["action"] == "free_requested":
            e["action"] = "free"  # the older name of free_requested
            break
    frames = [f for e in trace for f in e.get("frames", [])]
    deep = [dict(frames[i % len(frames)], line=i + 1) for i in range(2500)]
    trace.append({"action": "alloc", "addr": 7 << 32, "size": 512, "stream": 0, "time_us": 10**15, "frames": deep})
    trace.append({"action": "free_requested", "addr": 7 << 32, "size": 512, "stream": 0, "time_us": 10**15 + 1, "frames": deep})
    trace.append({"action": "oom", "device_free": 123456789, "size": (1 << 33) + 5, "stream": 0,
                  "time_us": 10**15 + 2, "frames": frames[:3]})
    trace.append({"action": "segment_map", "addr": 9 << 32, "size": 2 << 20, "stream": 0, "time_us": 10**15 + 3})
    trace.append({"action": "some_future_action", "addr": 1, "size": 2, "stream": 0, "time_us": 10**15 + 4})
    for i, s in enumerate(d["segments"]):
        if i % 2 == 0:
            s.pop("segment_pool_id", None)
        s.pop("frames", None)
        s["future_segment_key"] = [1, "x"]
        for j, b in enumerate(s["blocks"]):
            if j % 2 == 1:
                b.pop("frames", None)
            b["future_block_key"] = {"k": 1.5}
    d["future_top_key"] = {"anything": [None, True, b"bytes"]}
    d["external_annotations"].append({"name": "extra", "stage": "START", "device": 0, "time_us": 5, "future": 1})
    write("variants.pickle", d, protocol=5)


def bare_segments():
    d = load("cuda_graph.pickle")
    write("bare_segments.pickle", d["segments"], protocol=2)


def traces_only():
    d = load("cuda_graph.pickle")
    write("traces_only.pickle", {"device_traces": d["device_traces"]})


if __name__ == "__main__":
    legacy_history()
    multi_device()
    first_trace_empty()
    variants()
    bare_segments()
    traces_only()
