#!/usr/bin/env python3
"""Writes the VSM1 streams TestConvertChecksLikeAnalyze feeds to convert: one
good stream and five that analyze refuses but convert used to turn into a
pickle (exit 0). Run from anywhere; the output is deterministic."""
import marshal
import os
import struct

def frame(kind, payload=b""):
    return kind + struct.pack("<Q", len(payload)) + payload

def vsm(header, chunks):
    b = b"VSM1" + frame(b"H", marshal.dumps(header)) + frame(b"D")
    for c in chunks:
        b += frame(b"C", marshal.dumps(c))
    return b + frame(b"Z")

f = {"filename": "train.py", "line": 7, "name": "step"}
e = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1, "frames": [f]}
good = vsm({"segments": []}, [[e]])
out = {
    "good.vsm": good,
    "trailing.vsm": good + b"junk after the end",
    "entry_not_dict.vsm": vsm({"segments": []}, [[e, 5]]),
    "segments_int.vsm": vsm({"segments": 5}, [[e]]),
    "no_action.vsm": vsm({"segments": []}, [[{"addr": 1}]]),
    "frames_int.vsm": vsm({"segments": []}, [[dict(e, frames=3)]]),
}
here = os.path.dirname(os.path.abspath(__file__))
for name, b in out.items():
    with open(os.path.join(here, name), "wb") as fh:
        fh.write(b)
