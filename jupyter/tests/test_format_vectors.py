"""The shared cases of what Go, JavaScript, TypeScript and Python print alike,
and the kinds of frames (profiler/flame/testdata/format_vectors.json): the
notebook's formatting answers them, and its flame-graph SVG takes each
frame's kind from the node, as the engine decided it."""
import json
import os

import pytest

from conftest import ROOT

from vramscope.notebook import _flamesvg
from vramscope.notebook._report import fmt_bytes, fmt_count, fmt_percent

with open(os.path.join(ROOT, "profiler", "flame", "testdata", "format_vectors.json")) as f:
    VECTORS = json.load(f)


@pytest.mark.parametrize("n,want", VECTORS["bytes"])
def test_bytes(n, want):
    assert fmt_bytes(n) == want


@pytest.mark.parametrize("part,whole,want", VECTORS["percent"])
def test_percent(part, whole, want):
    assert fmt_percent(part, whole) == want


@pytest.mark.parametrize("n,want", VECTORS["counts"])
def test_counts(n, want):
    assert fmt_count(n) == want


@pytest.mark.parametrize("file,want", VECTORS["kinds"])
def test_kind_is_the_nodes(file, want):
    assert _flamesvg.kind({"n": "f", "f": file, "t": want}) == want
    other = "library" if want == "user" else "user"
    assert _flamesvg.kind({"n": "f", "f": file, "t": other}) == other  # the file decides nothing


def test_kind_unsaid_is_a_librarys():
    assert _flamesvg.kind({"n": "f", "f": "train.py"}) == "library"
    assert _flamesvg.kind({"n": "f", "t": "__class__"}) == "library"
    assert _flamesvg.kind({"n": "f", "t": ["user"]}) == "library"
