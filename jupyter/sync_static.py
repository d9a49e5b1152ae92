#!/usr/bin/env python3
"""Copies the shared flame-graph renderer (profiler/flame/web/flame.js and
flame.css) into the Python package (jupyter/vramscope/static/), where the
notebook widget and its HTML fallback load it from; the wheel ships that copy.
The copy must stay byte-identical (jupyter/tests/test_notebook_parts.py checks):
run this after editing the renderer.

    python3 jupyter/sync_static.py           copy
    python3 jupyter/sync_static.py --check   exit 1 if a copy differs
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WEB = os.path.join(os.path.dirname(HERE), "profiler", "flame", "web")
STATIC = os.path.join(HERE, "vramscope", "static")
FILES = ("flame.js", "flame.css")


def differs(name):
    try:
        with open(os.path.join(WEB, name), "rb") as a, open(os.path.join(STATIC, name), "rb") as b:
            return a.read() != b.read()
    except FileNotFoundError:
        return True


def main(argv):
    stale = [n for n in FILES if differs(n)]
    if "--check" in argv:
        for n in stale:
            print("jupyter/vramscope/static/%s differs from profiler/flame/web/%s: run python3 jupyter/sync_static.py"
                  % (n, n))
        return 1 if stale else 0
    for n in stale:
        shutil.copyfile(os.path.join(WEB, n), os.path.join(STATIC, n))
        print("copied profiler/flame/web/%s -> jupyter/vramscope/static/%s" % (n, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
