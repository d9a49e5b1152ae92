"""Reports that survive export (#22): each magic in a notebook run by nbclient
(widget state saved, as nbclient and `nbconvert --execute` do), then

- the outputs: the static copy first (text/html with no script and no URL, the
  flame graph an SVG image; text/plain), then the widget view, tied by the
  widget's static_key;
- nbconvert to HTML (the lab template, which JupyterLab's "Export as HTML"
  uses, and the classic one; also without widget state, as JupyterLab saves
  by default) opened in headless chromium with every request
  but the file aborted: summary, top lines, a finding and the flame graph are
  visible, on screen and in print (what webpdf prints); the PDF is kept;
- nbconvert's LaTeX (what the PDF exporter compiles; it takes no HTML): the
  text view (the PDF and webpdf exporters themselves are not tested: below);
- the executed notebook reopened in JupyterLab, then run again: each report
  shows once, the widget, with its static copy hidden; then saved and exported
  through the server's nbconvert handler ("Save and Export Notebook As"): each
  copy shows, with no network.

Screenshots and the PDF go to test-artifacts/ (or $VRAMSCOPE_ARTIFACTS).
"""
import base64
import html as htmllib
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import FAKETORCH, ROOT, require_module, skip_browser
from labserver import need_browser, serve
from test_notebook import engine  # noqa: F401 (a fixture)
from test_notebook import FakeDaemon, kernel_env, outputs, stderr, widget_state

nbformat = require_module("nbformat")
nbclient = require_module("nbclient")
nbconvert = require_module("nbconvert")

HERE = os.path.dirname(os.path.abspath(__file__))
ARTIFACTS = os.path.abspath(os.environ.get("VRAMSCOPE_ARTIFACTS") or os.path.join(ROOT, "test-artifacts"))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "snapshots")
OOM = os.path.join(SHARED, "oom_batch.pickle")
GPT2 = os.path.join(SHARED, "gpt2_train.pickle")
WIDGET = "application/vnd.jupyter.widget-view+json"
browser = pytest.mark.skipif(skip_browser(), reason="VRAMSCOPE_SKIP_BROWSER=1")

# index: (source, title the report shows); None: not a report. SOCK is set by the fixture.
CELLS = [
    ("%%load_ext vramscope\nimport os, sys\nos.chdir(%r)\nsys.path.insert(0, %r)\nimport torch" % (ROOT, FAKETORCH),
     None),
    ("%%vramscope open %s" % OOM, "oom_batch.pickle"),
    ("%%vramscope diff %s %s" % (GPT2, OOM), "diff gpt2_train.pickle \u2192 oom_batch.pickle"),
    ("def make(n):\n    return torch.cuda.memory._fake_alloc(n)", None),
    ("%%vramscope\ntorch.cuda.init()\na = make(100 << 20)\nb = make(50 << 20)\n'done'", "cell [5]"),
    ("%vramscope snapshot", "this kernel's GPU memory"),
    ("%vramscope live --socket $SOCK --interval 0.2", "live"),
    ("import time\ntime.sleep(1.5)\nlw = get_ipython().magics_manager.registry['VramscopeMagics'].live[0]\n"
     "lw.stop()\nlen(lw.samples)", None),
    # Another weight for the snapshot's report: its static copy follows (what an export shows).
    ("from vramscope import notebook\nnotebook.last().set_view('alloc')\nnotebook.last().weight", None),
]
REPORTS = [i for i, (_, title) in enumerate(CELLS) if title]


@pytest.fixture(scope="module")
def daemon_sock(tmp_path_factory):
    """A fake daemon with GPU counters for `live`, alive for the whole module
    (JupyterLab's kernel runs the notebook again)."""
    sock = str(tmp_path_factory.mktemp("d") / "d.sock")
    fake = FakeDaemon(sock)
    yield sock
    fake.close()


def notebook(sock):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [src for src, _ in CELLS]
    cells[6] = "SOCK = %r\n" % sock + cells[6]
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


@pytest.fixture(scope="module")
def executed(engine, daemon_sock, tmp_path_factory):
    """The notebook run by nbclient, widget state saved (nbclient's default)."""
    nb = notebook(daemon_sock)
    env = kernel_env(engine, VRAMSCOPE_SOCKET=str(tmp_path_factory.mktemp("s") / "none.sock"))
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": ROOT}}).execute(env=env)
    assert nb.metadata["widgets"], "nbclient saved the widget state"
    return nb


def report_outputs(cell):
    """(static copy, widget view) of a report cell, in that order."""
    ds = outputs(cell, "display_data")
    assert len(ds) == 2, [list(o.data) for o in ds]
    static, view = ds
    assert set(static.data) == {"text/html", "text/plain"}, list(static.data)
    assert WIDGET in view.data and view.data["text/plain"] == "", view.data
    return static.data, view.data


def svg_of(html, cls):
    """The SVG document of the image of class cls in a static copy."""
    m = re.search(r'<img class="%s" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"' % cls, html)
    assert m, html[:400]
    return ET.fromstring(base64.b64decode(m.group(1)).decode("utf-8"))


SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("index", REPORTS)
def test_each_report_has_its_static_copy_then_the_widget(executed, index):
    cell = executed.cells[index]
    assert not outputs(cell, "error") and not stderr(cell), cell.outputs
    static, view = report_outputs(cell)
    html = static["text/html"]
    state = widget_state(executed, view)
    # The widget's front end hides the copies of its own key (static/dom.js).
    assert re.fullmatch(r"[0-9a-f]{16}", state["static_key"])
    assert 'class="vramscope-static vs-static-%s"' % state["static_key"] in html
    # No script, nothing to fetch: it must read where nothing runs.
    assert "<script" not in html.lower() and "http://" not in html and "https://" not in html
    assert CELLS[index][1] in htmllib.unescape(html) and CELLS[index][1] in static["text/plain"]
    if "tree" in state:
        svg = svg_of(html, "vs-flame")
        assert int(svg.get("data-total")) == state["tree"]["root"]["v"]
        assert int(svg.get("data-frames")) >= 3 and len(svg.findall(".//%srect" % SVG)) == int(svg.get("data-frames"))
        assert "Top lines at the peak" in html or "peak \u0394" in html
    else:
        svg = svg_of(html, "vs-live-chart")
        assert svg.findall(".//%spolyline" % SVG), "the chart has lines"


def test_open_copy_holds_the_findings_and_top_lines(executed):
    static, view = report_outputs(executed.cells[1])
    state = widget_state(executed, view)
    html = static["text/html"]
    assert "CUDA out of memory: 1.53 GiB requested" in html
    top = state["top_lines"][0]
    assert top["label"] in html and top["label"] in static["text/plain"]
    assert "CUDA out of memory" in static["text/plain"]  # the LaTeX/PDF and terminal view


def test_cell_copy_names_the_cell(executed):
    static, view = report_outputs(executed.cells[4])
    svg = ET.tostring(svg_of(static["text/html"], "vs-flame"), encoding="unicode")
    assert "cell [4]" in svg and "ipykernel_" not in svg  # frame titles carry the cell-relative place
    assert "cell [4], line 2 (make)" in static["text/html"]


def test_copy_follows_the_weight_shown(executed):
    """set_view rewrote the snapshot report's copy in place (its display_id is the widget's key)."""
    assert executed.cells[8].outputs[-1].data["text/plain"] == "'alloc'"
    static, view = report_outputs(executed.cells[5])
    assert widget_state(executed, view)["weight"] == "alloc"
    assert "Flame graph (alloc): " in static["text/html"] and "Flame graph (peak)" not in static["text/html"]


def test_live_copy_is_its_last_state(executed):
    """The copy displayed at the start had no samples; stop() rewrote it (the
    update of its display_id, sent while the stopping cell ran)."""
    n = int(executed.cells[7].outputs[-1].data["text/plain"])
    static, view = report_outputs(executed.cells[6])
    assert n >= 3
    assert re.search(r"stopped \u00b7 %d samples over \d+ s" % n, static["text/plain"]), static["text/plain"]
    assert "GPU memory used: 5.00 GiB" in static["text/plain"]
    # the fake daemon's idle.report is the H200's slow data pipeline (docs/gpu/idle)
    assert "GPU idle 77% of 11 s: waiting for the data loader" in static["text/plain"]
    assert widget_state(executed, view)["running"] is False


# --- exporters ------------------------------------------------------------------------


def export_html(nb, path, template):
    body, _ = nbconvert.HTMLExporter(template_name=template).from_notebook_node(nb)
    path.write_text(body, encoding="utf-8")
    return body


@browser
def test_nbconvert_html_shows_the_reports_offline(executed, tmp_path, capsys):
    need_browser()
    stateless = nbformat.from_dict(executed)
    del stateless.metadata["widgets"]  # as JupyterLab saves by default
    pages = []
    for name, nb, template in (("lab", executed, "lab"), ("classic", executed, "classic"),
                               ("lab-nostate", stateless, "lab")):
        page = tmp_path / ("export-%s.html" % name)
        body = export_html(nb, page, template)
        # With state nbconvert picks the widget view, without it the widget's empty
        # text/plain: either way each copy is in the page, once.
        assert body.count('class="vramscope-static') == len(REPORTS), name
        pages.append("%s=%s" % (name, page))
    r = subprocess.run(["node", os.path.join(HERE, "export_browser.mjs")], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=180,
                       env=dict(os.environ, EXPORT_PAGES=" ".join(pages), VRAMSCOPE_ARTIFACTS=ARTIFACTS))
    with capsys.disabled():
        sys.stdout.write("\n  " + r.stdout.strip().replace("\n", "\n  ") + "\n")
    assert r.returncode == 0, r.stdout[-4000:]
    for name in ("export-lab.png", "export-classic.png", "export-lab-nostate.png", "export-lab-report.png",
                 "export-lab.pdf"):
        assert os.path.getsize(os.path.join(ARTIFACTS, name)) > 10_000, name


def test_latex_export_has_the_text_view(executed):
    """nbconvert's LaTeX (the PDF exporter's input) takes text/plain, not HTML:
    the summary, top lines and findings are there, in words."""
    tex, _ = nbconvert.LatexExporter().from_notebook_node(executed)
    assert "vramscope · oom\\_batch.pickle" in tex or "vramscope · oom_batch.pickle" in tex
    assert "CUDA out of memory: 1.53 GiB requested" in tex
    assert "train\\_gpt2.py:22" in tex or "train_gpt2.py:22" in tex


# nbconvert's PDF (xelatex) and webpdf (playwright's own chromium, from a CDN)
# exporters are not tested: neither tool can be installed on the machines the
# tests run on, and a test that always skips proves nothing. The page printed
# to PDF by Debian's chromium is tested above.


# --- JupyterLab -----------------------------------------------------------------------


@browser
def test_jupyterlab_shows_each_report_once(executed, tmp_path, capsys):
    need_browser()
    (tmp_path / "lab").mkdir()
    nbformat.write(executed, str(tmp_path / "lab" / "export.ipynb"))
    # Every cell in the DOM (no windowing), so each report can be looked at.
    settings = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}
    with serve(tmp_path, "lab", settings) as (url, token, _root):
        env = dict(os.environ, LAB_URL=url, LAB_TOKEN=token, LAB_NOTEBOOK="export.ipynb",
                   LAB_REPORTS=",".join(str(i) for i in REPORTS), VRAMSCOPE_ARTIFACTS=ARTIFACTS)
        r = subprocess.run(["node", os.path.join(HERE, "lab_static.mjs")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
    with capsys.disabled():
        sys.stdout.write("\n" + "\n".join("  lab: " + ln for ln in r.stdout.strip().splitlines()) + "\n")
    assert r.returncode == 0, r.stdout[-4000:] + "\n--- lab log ---\n" + (tmp_path / "lab.log").read_text()[-3000:]
    for name in ("lab-reopened.png", "lab-rerun.png", "lab-export.png"):
        assert os.path.getsize(os.path.join(ARTIFACTS, name)) > 10_000, name
