"""The facts the magic and the widget print beside a snapshot (vramscope.notebook._report), on the engine's
analysis of real snapshots (bin/vramscope, which make test-py builds)."""
import os
import re

import pytest

from conftest import ROOT
from vramscope.notebook import _engine, _report

BIN = os.path.join(ROOT, "bin", "vramscope")


@pytest.fixture
def engine(monkeypatch):
    if not os.access(BIN, os.X_OK):
        pytest.skip("bin/vramscope not built (make build)")
    monkeypatch.setenv("VRAMSCOPE_BIN", BIN)


def test_fragmentation_is_explained_where_printed(engine):
    # A healthy run prints a high fragmentation beside no findings: the line says what it measures
    # (the largest free block, the biggest request served without a new segment) and when it matters.
    result = _engine.analyze(os.path.join(ROOT, "examples", "snapshots", "example_train.pickle"))
    lines = [line for line in _report.facts(result) if line.startswith("allocator:")]
    assert len(lines) == 1, _report.facts(result)
    m = re.search(r"fragmentation (\d+)% \(the largest free block, ([0-9.]+ [KMG]iB), is the biggest request served "
                  r"without a new segment; it matters only near the device's or the cap's limit\)$", lines[0])
    assert m, lines[0]
    al = result["devices"][0]["allocator"]
    assert m.group(2) == _report.fmt_bytes(al["largest_free_block"])
