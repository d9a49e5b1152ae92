"""The agent's VSM1 writer beside pickle.dump on the largest example snapshot
(a benchmark, not a test: it prints figures and asserts nothing; make bench
runs it). It was test_speed_against_pickle in test_vsm.py, a test that could
not fail.

    .venv/bin/python jupyter/tests/bench_vsm.py
"""
import glob
import io
import os
import pickle
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from vramscope.agent._vsm import write_vsm  # noqa: E402


def main():
    paths = glob.glob(os.path.join(ROOT, "examples", "snapshots", "**", "*.pickle"), recursive=True)
    path = max(paths, key=os.path.getsize)
    with open(path, "rb") as f:
        snap = pickle.load(f)
    best = {}
    for name, write in (("write_vsm", lambda f: write_vsm(snap, f)),
                        ("pickle.dump(protocol=4)", lambda f: pickle.dump(snap, f, protocol=4))):
        for _ in range(3):
            buf = io.BytesIO()
            t = time.perf_counter()
            write(buf)
            best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
    vsm, pkl = best["write_vsm"], best["pickle.dump(protocol=4)"]
    print("%s (%.1f MiB): write_vsm %.1f ms, pickle.dump %.1f ms, ratio %.2f (best of 3 each)" % (
        os.path.relpath(path, ROOT), os.path.getsize(path) / 2**20, vsm * 1e3, pkl * 1e3, vsm / pkl))


if __name__ == "__main__":
    main()
