"""The static copy of a report, without a kernel: the flame graph's SVG
(_flamesvg) drawn as flame.js lays out and colours the same tree (checked
against flame.js itself, in node), bad trees and hostile names, the HTML
around it, the live view's copy, and a copy that fails to build."""
import base64
import colorsys
import json
import math
import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import EXAMPLE, ROOT, require_module

from vramscope.notebook import _flamesvg, _html, _livestatic

SVG = "{http://www.w3.org/2000/svg}"
FLAME_JS = os.path.join(ROOT, "profiler", "flame", "web", "flame.js")


def engine_tree(path):
    out = subprocess.run([os.path.join(ROOT, "bin", "vramscope"), "flame", "--format", "json", path],
                         check=True, capture_output=True).stdout
    return json.loads(out)


@pytest.fixture(scope="module")
def example_tree():
    if not os.path.exists(os.path.join(ROOT, "bin", "vramscope")):
        subprocess.run(["go", "build", "-o", "bin/vramscope", "./cmd/vramscope"], cwd=ROOT, check=True)
    return engine_tree(EXAMPLE)


def node(script, data):
    r = subprocess.run(["node", "-e", "const F = require(%s);\n%s" % (json.dumps(FLAME_JS), script)],
                       input=json.dumps(data), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_layout_is_flame_js_layout(example_tree):
    """Same frames, same order, same rows and x/width as flame.js at the same width and cull."""
    js = node("const t = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
              "const L = F.layout(t, 1000, 1.0);\n"
              "console.log(JSON.stringify(L.nodes.map((n, k) => [n.n, L.depth[k], L.x[k], L.w[k]])));", example_tree)
    py, cut = _flamesvg.layout(example_tree["root"], 1000, 1.0)
    assert not cut and len(py) == len(js) > 20
    for (n, d, x, w, _), (jn, jd, jx, jw) in zip(py, js):
        assert (n["n"], d) == (jn, jd) and math.isclose(x, jx, abs_tol=1e-6) and math.isclose(w, jw, abs_tol=1e-6)


def test_colours_are_flame_js_light_palette():
    js = node("console.log(JSON.stringify(F.buildPalette(false).fills));", None)

    def hexof(hsl):
        h, s, l = (float(v) for v in re.findall(r"[\d.]+", hsl))
        r, g, b = colorsys.hls_to_rgb(h / 360, l / 100, s / 100)
        return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))

    assert [[hexof(c) for c in fills] for fills in js] == [_flamesvg.PALETTE[k]
                                                           for k in ("user", "library", "synthetic")]
    assert _flamesvg.fnv1a("a") == 0xE40C292C and _flamesvg.fnv1a("") == 0x811C9DC5  # FNV-1a test vectors


def drawn_kinds(svg_text):
    """How many frames an SVG fills in each kind's palette."""
    svg, by_fill = ET.fromstring(svg_text), {}
    for k, fills in _flamesvg.PALETTE.items():
        by_fill.update((f, k) for f in fills)
    out = {}
    for g in svg.findall(SVG + "g"):
        if g.get("fill") in by_fill:
            k = by_fill[g.get("fill")]
            out[k] = out.get(k, 0) + len(g.findall(SVG + "rect"))
    return out


def test_frames_are_coloured_by_the_engines_kind(example_tree):
    """Each frame is filled in the palette of the kind the engine put on it
    ("t"), the top row in the synthetic one; a file decides nothing here."""
    frames, _ = _flamesvg.layout(example_tree["root"])
    want = {}
    for n, _, _, _, is_root in frames:
        k = "synthetic" if is_root else n.get("t", "library")  # a library's kind goes unsaid
        want[k] = want.get(k, 0) + 1
    assert want.get("user") and want.get("library")  # a real run has both
    assert drawn_kinds(_flamesvg.render(example_tree).svg) == want
    flipped = json.loads(json.dumps(example_tree))
    stack = list(flipped["root"]["c"])
    while stack:
        n = stack.pop()
        n["t"] = "user"
        stack.extend(n.get("c") or [])
    assert drawn_kinds(_flamesvg.render(flipped).svg) == {"synthetic": 1, "user": len(frames) - 1}


def test_svg_of_a_real_tree(example_tree):
    d = _flamesvg.render(example_tree)
    svg = ET.fromstring(d.svg)
    rects = svg.findall(".//%srect" % SVG)
    assert len(rects) == d.frames == int(svg.get("data-frames")) and d.frames + d.hidden == 64
    assert int(svg.get("data-total")) == example_tree["root"]["v"] == d.total
    root = rects[0]
    assert float(root.get("width")) == _flamesvg.WIDTH
    assert root.find(SVG + "title").text.startswith("all \u2014 1.54 GiB")
    labels = [t.text for t in svg.iter(SVG + "text")]
    assert labels[0] == "all \u00b7 1.54 GiB"
    # The engine's labels (flame.js's frameLabel): the training loop's calls read apart by line.
    assert len({l for l in labels if re.fullmatch(r"example_train:\d+", l)}) >= 2, labels
    assert int(svg.get("height")) == (max(int(r.get("y")) for r in rects) // _flamesvg.ROW + 1) * _flamesvg.ROW


def test_labels_fit_their_frames():
    tree = {"root": {"n": "all", "v": 100, "c": [{"n": "x" * 500, "f": "a.py", "l": 1, "v": 50},
                                                 {"n": "tiny_name_here", "v": 2}]}}
    svg = ET.fromstring(_flamesvg.render(tree, width=1000).svg)
    labels = [t.text for t in svg.iter(SVG + "text")]
    long = [s for s in labels if s.startswith("xxx")][0]
    assert long.endswith("\u2026") and len(long) * _flamesvg.CHAR <= 500 - 8
    assert not any(s.startswith("tiny") for s in labels)  # 20 px: no room for a label


@pytest.mark.parametrize("tree,reason", [
    (None, "no root"), ({}, "no root"), ({"root": "all"}, "no root"), ([1, 2], "no root"),
    ({"root": {"n": "all", "v": 0}}, "no memory recorded"), ({"root": {"n": "all", "v": "lots"}}, "no memory recorded"),
    ({"root": {"n": "all", "v": float("nan")}}, "no memory recorded"),
])
def test_nothing_to_draw_says_why(tree, reason):
    d = _flamesvg.render(tree)
    assert not d and reason in d.reason
    page = _html.flame_image(tree, "peak")
    assert reason in page and "<img" not in page


def test_bad_frames_draw_as_nothing():
    tree = {"root": {"n": "all", "v": 100, "c": [
        {"n": "ok", "v": 60}, {"n": "negative", "v": -5}, {"n": "text", "v": "x"}, "not a frame", None,
        {"n": "inf", "v": float("inf")}, {"n": None, "v": 40, "c": "not a list"}]}}
    d = _flamesvg.render(tree)
    names = [r.find(SVG + "title").text.split(" \u2014 ")[0] for r in ET.fromstring(d.svg).iter(SVG + "rect")]
    assert names == ["all", "ok", ""]


def test_deep_and_wide_trees_are_bounded():
    deep = leaf = {"n": "f0", "f": "r.py", "l": 1, "v": 10}
    for i in range(1, 5000):  # recursion 5,000 deep: no RecursionError, rows cut
        leaf["c"] = [{"n": "f%d" % i, "f": "r.py", "l": 1, "v": 10}]
        leaf = leaf["c"][0]
    d = _flamesvg.render({"root": {"n": "all", "v": 10, "c": [deep]}})
    assert d.cut and d.frames == _flamesvg.MAX_ROWS and int(ET.fromstring(d.svg).get("height")) == \
        _flamesvg.MAX_ROWS * _flamesvg.ROW
    kids = [{"n": "w%d" % i, "v": 10000 - i} for i in range(4000)]
    wide = {"n": "all", "v": sum(k["v"] for k in kids), "c": kids}
    d = _flamesvg.render({"root": wide}, width=10 ** 7)  # every frame over a pixel: the cap decides
    assert d.frames == _flamesvg.MAX_FRAMES and d.hidden == 4001 - _flamesvg.MAX_FRAMES
    kept = [r.find(SVG + "title").text.split(" \u2014 ")[0] for r in ET.fromstring(d.svg).iter(SVG + "rect")]
    assert "w0" in kept and "w3999" not in kept  # the widest stay
    assert "frames too narrow to draw left out" in _html.flame_image({"root": wide}, "")


EVIL = "</script><script>alert(1)</script><!--&\"'<svg onload=x>\x00\x1b\ud800"


def test_hostile_names_stay_text():
    view = {"title": EVIL, "facts": [EVIL], "peak_line": EVIL, "note": EVIL,
            "top_lines": [{"label": EVIL, "peak_bytes": 1, "peak_share": 1, "alloc_bytes": 1, "allocs": 1}],
            "findings": [{"severity": EVIL, "title": EVIL, "where": EVIL, "fix": EVIL}],
            "diff": [{"label": EVIL, "status": EVIL, "peak_before": 1, "peak_after": 2, "peak_delta": 1}],
            "tree": {"title": EVIL, "weight": EVIL, "root": {"n": EVIL, "f": EVIL, "l": 1, "v": 10,
                                                            "c": [{"n": EVIL, "f": EVIL, "l": 2, "v": 10}]}}}
    page = _html.page(view, "0123456789abcdef")
    assert "<script" not in page and "<svg" not in page and "<!--" not in page
    uri = re.search(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page).group(1)
    svg = ET.fromstring(base64.b64decode(uri))  # well-formed: the names are escaped text
    shown = EVIL.replace("\x00", "\ufffd").replace("\x1b", "\ufffd").replace("\ud800", "\ufffd")
    assert shown in [t.text.split(" \u2014 ")[0] for t in svg.iter(SVG + "title")]
    assert EVIL in _html.plain(view)


def test_page_parts_and_key():
    view = {"title": "t", "facts": ["a", "b"], "top_lines": [], "findings": [],
            "tree": {"weight": "alloc", "root": {"n": "all", "v": 1 << 30}}, "side": "after"}
    page = _html.page(view, "0123456789abcdef")
    assert page.startswith('<div class="vramscope-static vs-static-0123456789abcdef">')
    assert "Flame graph (alloc, after): 1.00 GiB in all" in page and "Findings: none" in page
    assert _html.page(view).startswith('<div class="vramscope-static">')


def test_a_copy_that_fails_says_so():
    require_module("anywidget")
    from vramscope.notebook import _widget

    def boom():
        raise KeyError("peak_bytes")

    b = _widget.static_bundle(boom, lambda: "x")
    assert "could not be built (KeyError: 'peak_bytes')" in b["text/plain"]
    assert 'class="vramscope-static"' in b["text/html"] and "KeyError" in b["text/html"]


def test_live_copy():
    t = 1_700_000_000_000
    samples = [{"t": t + i * 1000, "used": 5 << 30, "total": 80 << 30, "util": 30 + i, "allocated": None,
                "reserved": None} for i in range(5)]
    samples[2]["used"] = None  # a gap
    samples += [{"t": "bad"}, "garbage", {"t": float("nan")}, {"t": t + 6000, "used": True, "util": float("inf"),
                                                              "allocated": 1 << 20}]
    state = {"samples": samples, "running": False, "source": "GPU 0 counters from the daemon", "note": "",
             "device": 0, "total": 80 << 30}
    page = _livestatic.page(state, "0123456789abcdef")
    assert "stopped \u00b7 6 samples over 6 s, the last at 2023-11-14 22:13:26 UTC" in page
    assert "GPU memory used <b>5.00 GiB</b>" in page and "torch allocated <b>1.00 MiB</b>" in page
    svg = ET.fromstring(base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)", page).group(1)))
    assert len(svg.findall(SVG + "polyline")) == 3  # used broken by the gap, util; allocated: one point
    assert len(svg.findall(SVG + "circle")) == 1
    empty = dict(state, samples=[], running=True)
    assert "running \u00b7 no samples yet" in _livestatic.page(empty) and "<img" not in _livestatic.page(empty)
    assert _livestatic.plain(state).splitlines()[1] == "  " + _livestatic.status(state)
    warned = dict(state, warning="out of memory in 1m35s (step 1411): memory grows 1.00 MiB/step toward 3.00 GiB")
    assert '<div class="vs-live-warning"><b>\u26a0 out of memory in 1m35s (step 1411)' in _livestatic.page(warned)
    assert "  warning: " + warned["warning"] in _livestatic.plain(warned).splitlines()
    assert "vs-live-warning" not in page
