"""The widget in a real JupyterLab 4 and a real Notebook 7, driven by a real browser.

Starts JupyterLab on loopback (labserver.py) with a notebook that runs `%vramscope open
examples/snapshots/example_train.pickle`, shows a 100k-frame tree and opens
examples/snapshots/agent_oom.pickle, then runs lab_browser.mjs (Debian's
chromium through playwright-core): the widget renders, flame-graph nodes
exist, hovering shows bytes, a click selects a frame and the kernel holds the
selection, another weight is computed by the kernel, resting on a moment of
the timeline lists its top lines (no more bytes than the moment's click
shows), the click shows the moment's live set, the keyboard zooms and resets,
the allocator map is drawn and a hovered block named (at the peak, and at the
OOM beside the failing request), a finding selects its time range and its
frames, JupyterLab Dark and Light repaint every view with readable text, and
the report's static copy (an output of its own, for exporters) is hidden.
Screenshots go to test-artifacts/ (or $VRAMSCOPE_ARTIFACTS); the 100k render
time is printed.

Needs node, chromium (/usr/bin/chromium or $VRAMSCOPE_CHROMIUM), go (for the
100k demo tree) and `npm ci`; a missing piece fails the test.
VRAMSCOPE_SKIP_BROWSER=1 skips it on purpose.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLE, ROOT, skip_browser
from labserver import UIS, need_browser, serve

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "lab_browser.mjs")
ARTIFACTS = os.path.abspath(os.environ.get("VRAMSCOPE_ARTIFACTS") or os.path.join(ROOT, "test-artifacts"))

pytestmark = pytest.mark.skipif(skip_browser(), reason="VRAMSCOPE_SKIP_BROWSER=1")


def demo_tree(path):
    """The 100k-frame tree of profiler/flame/internal/demo (the same the CLI page's browser test draws)."""
    html = path + ".html"
    subprocess.run(["go", "run", "./profiler/flame/internal/demo", html], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(html, encoding="utf-8") as f:
        m = re.search(r'<script type="application/json" id="vramscope-data">(.*?)</script>', f.read(), re.S)
    with open(path, "w", encoding="utf-8") as f:
        f.write(m.group(1))


def write_notebook(path, tree_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [
        "%%load_ext vramscope\nimport os\nos.chdir(%r)" % ROOT,
        "%vramscope open examples/snapshots/example_train.pickle",
        "import json\nfrom vramscope import notebook\nw = notebook.last()\n"
        "notebook.flame(json.load(open(%r)), '100k frames')" % tree_path,
        "%vramscope open examples/snapshots/agent_oom.pickle",
        # A stack of 1,000 frames: the kernel sends its tree as JSON text (_deepjson.py).
        "import pickle, tempfile\nf = {'name': 'f', 'filename': 'a.py', 'line': 1}\n"
        "deep = os.path.join(tempfile.mkdtemp(), 'deep.pickle')\n"
        "pickle.dump({'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 512, 'stream': 0, "
        "'time_us': 1, 'frames': [f] * 1000}]]}, open(deep, 'wb'), protocol=4)\n"
        "%vramscope open $deep",
    ]]
    nbformat.write(nb, path)


@pytest.fixture(params=sorted(UIS))
def lab(tmp_path, request):
    need_browser(("node", "go"))
    tree = str(tmp_path / "tree100k.json")
    demo_tree(tree)
    (tmp_path / "lab").mkdir()
    write_notebook(str(tmp_path / "lab" / "widget.ipynb"), tree)
    with serve(tmp_path, request.param) as (url, token, _root):
        yield url, token, tmp_path, request.param


def test_widget_in_jupyterlab(lab, capsys):
    """JupyterLab 4 and Notebook 7 (the same widget code, another page)."""
    url, token, tmp, ui = lab
    env = dict(os.environ, LAB_URL=url, LAB_TOKEN=token, LAB_NOTEBOOK="widget.ipynb", VRAMSCOPE_ARTIFACTS=ARTIFACTS,
               LAB_SOURCE=os.path.join(ROOT, "examples", "record", "record_examples.py"), LAB_PAGE=UIS[ui][2],
               LAB_SHOT_PREFIX="" if ui == "lab" else ui + "-")
    r = subprocess.run(["node", SCRIPT], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=240)
    with capsys.disabled():
        sys.stdout.write("\n" + "\n".join("  lab: " + ln for ln in r.stdout.strip().splitlines()) + "\n")
    assert r.returncode == 0, r.stdout[-4000:] + "\n--- lab log ---\n" + (tmp / "lab.log").read_text()[-3000:]
    for name in ("notebook-widget-hover.png", "notebook-widget-selected.png", "notebook-widget-timeline.png",
                 "notebook-widget-100k.png", "notebook-widget-moment-hover.png", "notebook-widget-allocmap.png",
                 "notebook-widget-finding.png", "notebook-widget-dark.png", "notebook-widget-light.png"):
        assert os.path.getsize(os.path.join(ARTIFACTS, env["LAB_SHOT_PREFIX"] + name)) > 10_000
    assert os.path.exists(EXAMPLE)
    if os.environ.get("VRAMSCOPE_WIDGET_BENCH") and ui == "lab":
        write_widget_bench(os.environ["VRAMSCOPE_WIDGET_BENCH"], r.stdout)


def write_widget_bench(path, out):
    """make bench-widget: the 100k-node render figure of this run, with the
    machine and the time, and the GPU notebook's timings (what %%vramscope
    added to a training cell on the H200, jupyter/examples/gpu_cell.json)."""
    import datetime
    import json
    import platform

    line = [ln for ln in out.splitlines() if ln.startswith("vramscope widget:")]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = ["## Notebook widget (`make bench-widget`)", "",
          "JupyterLab on loopback, Debian's chromium through playwright-core (jupyter/tests/lab_browser.mjs); "
          "the widget's first render of a 100,000-node flame graph, from performance marks. "
          "Run %s on %s (%d cores, %s; load average %s)." % (now, platform.node(), os.cpu_count() or 0, cpu or "?",
                                                               " ".join("%.2f" % x for x in os.getloadavg())), ""]
    md += ["- " + (line[0] if line else "no figure printed")]
    gpu = os.path.join(ROOT, "jupyter", "examples", "gpu_cell.json")
    if os.path.exists(gpu):
        with open(gpu) as f:
            g = json.load(f)
        t = (g.get("results") or {}).get("train") or {}
        if t:
            md += ["- `%%%%vramscope` around a training cell on the H200 (%s, jupyter/examples/gpu_cell.ipynb, %s trace events): "
                   "the magic added %.3f s (snapshot %.3f, write %.3f, engine %.3f, display %.3f; goal <= 1 s)."
                   % (g.get("when"), t.get("events"), t["total_s"], t["snapshot_s"], t["write_s"], t["engine_s"],
                      t["display_s"])]
    with open(path, "w") as f:
        f.write("\n".join(md) + "\n")
