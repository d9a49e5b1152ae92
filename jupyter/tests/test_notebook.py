"""Real notebooks in a real ipykernel, run by nbclient: %vramscope open / diff on
the shared fixtures and the example snapshot, %%vramscope on this CPU-only
kernel, each report as its static copy (an output of its own, see
test_export.py) followed by the widget view, and
cell-relative names built from the file names the running kernel gives its
cells. A second kernel imports the fake torch (tests/faketorch) to follow
%%vramscope's recording path: start, restore, the user's own recording left
alone, errors in the cell and in the magic. The real GPU run is
jupyter/examples/gpu_cell.ipynb (see jupyter/README.md)."""
import base64
import json
import os
import re
import socket
import subprocess
import threading

import pytest

from conftest import EXAMPLE, FAKETORCH, ROOT, require_module

nbformat = require_module("nbformat")
nbclient = require_module("nbclient")

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "snapshots")
GPT2 = os.path.join(SHARED, "gpt2_train.pickle")
LLAMA = os.path.join(SHARED, "llama_lora_gc.pickle")
WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC = os.path.join(ROOT, "jupyter", "vramscope", "notebook", "static")


@pytest.fixture(scope="session")
def engine():
    """The engine: $VRAMSCOPE_BIN, else the checkout's bin/vramscope (make build),
    built here when missing."""
    env = os.environ.get("VRAMSCOPE_BIN")
    if env:
        return env
    out = os.path.join(ROOT, "bin", "vramscope")
    if not os.path.exists(out):
        subprocess.run(["go", "build", "-o", out, "./cmd/vramscope"], cwd=ROOT, check=True)
    return out


def kernel_env(engine, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMSCOPE_") and k != "PYTHONPATH"}
    env.update(VRAMSCOPE_BIN=engine, PYTHONPATH=os.path.join(ROOT, "jupyter"))
    env.update(extra)
    return env


def execute(cells, env, allow_errors=True, timeout=120):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=allow_errors,
                                     resources={"metadata": {"path": ROOT}})
    client.execute(env=env)
    return nb


def outputs(cell, kind=None):
    return [o for o in cell.outputs if kind is None or o.output_type == kind]


def stderr(cell):
    return "".join(o.text for o in outputs(cell, "stream") if o.name == "stderr")


def result(cell):
    r = outputs(cell, "execute_result")
    return r[0].data["text/plain"] if r else None


def report(cell):
    """A report's two display outputs: its static copy (text/html, text/plain;
    what exporters show), then the widget view. Returned merged, as one bundle."""
    ds = outputs(cell, "display_data")
    views = [i for i, o in enumerate(ds) if WIDGET in o.data]
    assert len(views) == 1 and views[0] >= 1, cell.outputs
    static, view = ds[views[0] - 1].data, ds[views[0]].data
    assert set(static) == {"text/html", "text/plain"} and 'class="vramscope-static' in static["text/html"], list(static)
    assert set(view) == {WIDGET, "text/plain"} and view["text/plain"] == "", view
    return dict(view, **static)


def widget_state(nb, data):
    states = nb.metadata["widgets"][WIDGET_STATE]["state"]
    return states[data[WIDGET]["model_id"]]["state"]


def tree_nodes(tree):
    stack = [tree["root"]]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.get("c") or ())


def engine_analysis(engine, path):
    return json.loads(subprocess.run([engine, "analyze", "--json", path], check=True, capture_output=True).stdout)


def static_svg(html_text):
    """The flame graph's SVG document in a static copy (an <img> data URI)."""
    m = re.search(r'<img class="vs-flame" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html_text)
    assert m, html_text[:500]
    return base64.b64decode(m.group(1)).decode("utf-8")


def svg_total(svg):
    return int(re.search(r'data-total="(\d+)"', svg).group(1))


# --- the CPU-only kernel -----------------------------------------------------------

CPU_CELLS = [
    "%%load_ext vramscope\nimport os\nos.chdir(%r)" % ROOT,                                   # 0 [1]
    "%%vramscope open %s" % os.path.relpath(GPT2, ROOT),                                       # 1 [2]
    "%%vramscope open %s" % os.path.relpath(LLAMA, ROOT),                                      # 2 [3]
    "%vramscope open examples/snapshots/example_train.pickle",                                 # 3 [4]
    "%%vramscope diff %s %s" % (os.path.relpath(GPT2, ROOT), os.path.relpath(LLAMA, ROOT)),   # 4 [5]
    "%vramscope diff examples/snapshots/example_train.pickle examples/snapshots/agent_gpt2.pickle",  # 5 [6]
    "%%vramscope\nx = 41\nx + 1",                                                              # 6 [7]
    "%%vramscope --top 3\nx + 1;",                                                             # 7 [8]
    '%%vramscope\n\ndef boom():\n    raise ValueError("from the cell")\nboom()',              # 8 [9]
    "%%vramscope --weight heaviest\n6 * 7",                                                    # 9 [10]
    "(x, Out[7], _10)",                                                                        # 10 [11]
    "%vramscope live",                                                                         # 11 [12]
    "%vramscope snapshot",                                                                     # 12 [13]
    "%vramscope open no/such/file.pickle",                                                     # 13 [14]
    # 14 [15]: this cell's own file name, given by the running kernel, replaces the
    # user frames of the example snapshot: the mapper must name them "cell [15]".
    "import pickle, sys\n"
    "cell_file = sys._getframe().f_code.co_filename\n"
    "snap = pickle.load(open('examples/snapshots/example_train.pickle', 'rb'))\n"
    "def rename(frames):\n"
    "    for f in frames or []:\n"
    "        if f['filename'].endswith('record_examples.py'):\n"
    "            f['filename'] = cell_file\n"
    "for trace in snap['device_traces']:\n"
    "    for e in trace:\n"
    "        rename(e.get('frames'))\n"
    "for seg in snap['segments']:\n"
    "    rename(seg.get('frames'))\n"
    "    for b in seg.get('blocks') or []:\n"
    "        rename(b.get('frames'))\n"
    "pickle.dump(snap, open(os.environ['CELLSNAP'], 'wb'), protocol=4)\n"
    "cell_file",
    "%vramscope open $CELLSNAP",                                                               # 15 [16]
    "import vramscope.notebook as vn\nw = vn.last()\nw.selected = {'name': 'example_train', 'file': 'cell [15]', "
    "'line': 69, 'path': ['all']}\nw.selected_info",                                          # 16 [17]
    # 17 [18], 18 [19]: a stack of 1,000 frames (600 raised RecursionError in the json module).
    "f = {'name': 'f', 'filename': 'a.py', 'line': 1}\n"
    "DEEPSNAP = os.path.join(os.path.dirname(os.environ['CELLSNAP']), 'deep.pickle')\n"
    "pickle.dump({'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 512, 'stream': 0, "
    "'time_us': 1, 'frames': [f] * 1000}]]}, open(DEEPSNAP, 'wb'), protocol=4)",
    "%vramscope open $DEEPSNAP",
]


@pytest.fixture(scope="module")
def cpu_nb(engine, tmp_path_factory):
    d = tmp_path_factory.mktemp("nb")
    env = kernel_env(engine, VRAMSCOPE_SOCKET=str(d / "no-daemon.sock"), CELLSNAP=str(d / "cellsnap.pickle"))
    # IPython expands $CELLSNAP in line magics from the user namespace, not the environment.
    cells = list(CPU_CELLS)
    cells[15] = "CELLSNAP = os.environ['CELLSNAP']\n%vramscope open $CELLSNAP"
    return execute(cells, env)


@pytest.mark.parametrize("index,path", [(1, GPT2), (2, LLAMA), (3, EXAMPLE)])
def test_open_shows_widget_and_html(cpu_nb, engine, index, path):
    cell = cpu_nb.cells[index]
    assert not outputs(cell, "error") and not stderr(cell), cell.outputs
    data = report(cell)
    html = data["text/html"]
    # The static copy needs nothing: no script, no URL; its flame graph is an SVG image.
    assert "<script" not in html and "http://" not in html and "https://" not in html and "<iframe" not in html
    # The numbers are the engine's: the top line and the peak.
    res = engine_analysis(engine, path)
    top = res["sites"][0]
    state = widget_state(cpu_nb, data)
    assert state["top_lines"][0]["file"] == top["file"] and state["top_lines"][0]["line"] == top["line"]
    assert state["top_lines"][0]["peak_bytes"] == top["peak_bytes"]
    assert state["tree"]["root"]["v"] == svg_total(static_svg(html))
    assert 'class="vramscope-static vs-static-%s"' % state["static_key"] in html
    assert state["weight"] == "peak" and state["weights"] == ["peak", "alloc", "current"]
    assert state["findings"] == [] or state["findings"][0]["title"]
    assert any(os.path.basename(path) in f for f in state["facts"])
    assert os.path.basename(path) in data["text/plain"]
    # The front end is flame.js (wrapped) + widget.js, shipped in the widget's state.
    with open(os.path.join(STATIC, "widget.js"), encoding="utf-8") as f:
        assert state["_esm"].endswith(f.read())
    assert "const VramscopeFlame" in state["_esm"]


def test_open_deep_stack(cpu_nb):
    """%vramscope open of a 1,000-frame stack shows its report (600 frames raised
    RecursionError): the widget's tree comes as JSON text, 1,001 levels deep."""
    from vramscope.notebook import _deepjson

    cell = cpu_nb.cells[18]
    assert not outputs(cell, "error") and not stderr(cell), cell.outputs
    data = report(cell)
    tree = widget_state(cpu_nb, data)["tree"]
    assert isinstance(tree, str) and _deepjson.depth(_deepjson.loads(tree)) == 1001
    assert svg_total(static_svg(data["text/html"])) == 512


def test_open_example_matches_cli_peak(cpu_nb, engine):
    data = report(cpu_nb.cells[3])
    res = engine_analysis(engine, EXAMPLE)
    state = widget_state(cpu_nb, data)
    facts = " ".join(state["facts"])
    assert "peak 1.54 GiB" in facts and "4,636 trace events" in facts
    # The linked report's data: the timeline and the live set over time.
    assert state["report"]["peak"]["bytes"] == 1648864256 and state["report"]["moments"]["buckets"]
    assert res["peak"]["bytes"] == 1648864256


@pytest.mark.parametrize("index", [4, 5])
def test_diff_shows_widget_and_html(cpu_nb, index):
    cell = cpu_nb.cells[index]
    assert not outputs(cell, "error"), cell.outputs
    data = report(cell)
    state = widget_state(cpu_nb, data)
    assert state["diff"] and {"peak_delta", "status", "label"} <= set(state["diff"][0])
    assert state["sides"] == ["after", "before"] and state["side"] == "after"
    assert "\u2192" in state["facts"][0]
    assert "peak \u0394" in data["text/html"]
    # The widget's report (report.js) overlays the before timeline on the after one.
    rep = state["report"]
    assert rep["before"]["device"]["timeline"]["points"] and rep["device"]["timeline"]["points"]
    assert rep["diff"]["peak_delta"] == rep["peak"]["bytes"] - rep["before"]["peak"]["bytes"]


def test_diff_fixture_numbers(cpu_nb):
    state = widget_state(cpu_nb, report(cpu_nb.cells[4]))
    assert state["facts"][1].startswith("peak 5.42 GiB \u2192 2.15 GiB (-3.27 GiB)")
    assert state["diff"][0]["label"] == "/workspace/trainer/train_gpt2.py:22 (train_step)"


def test_magic_without_cuda_returns_the_value(cpu_nb):
    cell = cpu_nb.cells[6]
    assert cell.execution_count == 7
    assert result(cell) == "42"
    lines = stderr(cell).splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramscope: no CUDA here"), lines
    assert not outputs(cell, "display_data")
    # a trailing ; hides the value as without the magic
    assert result(cpu_nb.cells[7]) is None and not outputs(cpu_nb.cells[7], "error")
    # the cell ran in the user's namespace; Out and _N hold its value
    assert result(cpu_nb.cells[10]) == "(41, 42, 42)"


def test_magic_raises_the_cells_exception(cpu_nb):
    cell = cpu_nb.cells[8]
    errs = outputs(cell, "error")
    assert len(errs) == 1 and errs[0].ename == "ValueError" and errs[0].evalue == "from the cell"
    tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errs[0].traceback))
    # line numbers as the cell shows them, %%vramscope line included
    assert "In[9], line 5" in tb and "In[9], line 4" in tb and 'raise ValueError("from the cell")' in tb
    assert "_magic.py" not in tb  # the magic's own frames are hidden


def test_magic_bad_arguments_still_run_the_cell(cpu_nb):
    cell = cpu_nb.cells[9]
    assert result(cell) == "42"
    lines = stderr(cell).splitlines()
    assert len(lines) == 1 and "weight" in lines[0] and "runs without profiling" in lines[0], lines


def test_live_and_snapshot_say_why_not(cpu_nb):
    live = stderr(cpu_nb.cells[11]).splitlines()
    assert len(live) == 1 and live[0].startswith("vramscope: nothing to sample: no daemon at"), live
    assert "torch is not installed" in live[0]
    snap = stderr(cpu_nb.cells[12]).splitlines()
    assert len(snap) == 1 and "no CUDA in this kernel" in snap[0], snap


def test_open_missing_file_is_a_usage_error(cpu_nb):
    # IPython prints a UsageError as one line, without a traceback
    assert stderr(cpu_nb.cells[13]).strip() == "UsageError: vramscope: no such file: no/such/file.pickle"


def test_cell_relative_names_from_the_kernels_own_file_names(cpu_nb):
    made = cpu_nb.cells[14]
    cell_file = result(made).strip("'")
    # ipykernel names cell code /tmp/ipykernel_PID/HASH.py
    assert re.search(r"ipykernel_\d+/\d+\.py$", cell_file), cell_file
    n = made.execution_count
    data = report(cpu_nb.cells[15])
    state = widget_state(cpu_nb, data)
    labels = [r["label"] for r in state["top_lines"]]
    assert labels[0] == "cell [%d], line 69 (example_train)" % n, labels
    assert all(cell_file not in lab for lab in labels)
    assert "cell [%d], line 69" % n in data["text/html"]
    # the flame tree's frames of that cell are renamed too, in the widget and the static copy
    files = {x.get("f") for x in tree_nodes(state["tree"])}
    assert "cell [%d]" % n in files and cell_file not in files
    svg = static_svg(data["text/html"])
    assert "cell [%d]:69" % n in svg and cell_file not in svg
    # and the engine's phase names lose the file name ("[backward pass of 1234.py:70]")
    names = [x["n"] for x in tree_nodes(state["tree"]) if "backward pass of" in x["n"]]
    assert names and all(nm == "[backward pass of cell [%d]:70]" % n for nm in names), names
    # selecting a frame: the kernel answers with the place and the cell's source line
    info = result(cpu_nb.cells[16])
    assert "'where': 'cell [%d], line 69'" % n in info and "'name': 'example_train'" in info


def test_failing_cell_fails_the_execution(engine, tmp_path):
    """An exception in a %%vramscope cell is the cell's error: nbclient stops there."""
    env = kernel_env(engine, VRAMSCOPE_SOCKET=str(tmp_path / "none.sock"))
    with pytest.raises(nbclient.exceptions.CellExecutionError) as e:
        execute(["%load_ext vramscope", "%%vramscope\n1 / 0", "never = 1"], env, allow_errors=False)
    assert "ZeroDivisionError" in str(e.value)


# --- a kernel with the fake torch -------------------------------------------------

def _recorded_idle_report():
    """idle.report's answer for the slow data pipeline recorded on the H200 (docs/gpu/idle)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "gpu", "idle", "slow_loader.report.json")) as f:
        return json.load(f)


class FakeDaemon:
    """Answers daemon.hello, counters.devices, counters.series, idle.report and process.list on a Unix socket."""

    def __init__(self, path):
        self.path = path
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.calls = []
        self.processes = []  # process.list's answer
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        import time

        buf = b""
        with c:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    req = json.loads(line)
                    self.calls.append(req["method"])
                    now = int(time.time() * 1000)
                    sample = {"time_ms": now, "device": 0, "mem_used_bytes": 5 << 30, "mem_total_bytes": 80 << 30,
                              "util_gpu_pct": 37}
                    res = {"daemon.hello": {"version": "test", "api_version": "1.0", "pid": 1, "host": "h"},
                           "counters.devices": {"status": {"available": True, "devices": 1}, "devices": [],
                                                "latest": [sample]},
                           "counters.series": {"device": 0, "samples": [dict(sample, time_ms=now - 2000)]},
                           "idle.report": _recorded_idle_report(),
                           "process.list": {"processes": self.processes}}
                    out = {"jsonrpc": "2.0", "id": req["id"]}
                    if req["method"] in res:
                        out["result"] = res[req["method"]]
                    else:
                        out["error"] = {"code": -32601, "message": "method not found"}
                    c.sendall((json.dumps(out) + "\n").encode())

    def close(self):
        self.srv.close()


GPU_CELLS = [
    "import os, sys\nsys.path.insert(0, %r)\n%%load_ext vramscope\nimport torch" % FAKETORCH,       # 0 [1]
    "def make(n):\n    return torch.cuda.memory._fake_alloc(n)",                                   # 1 [2]
    "%%vramscope --max-entries 5000\ntorch.cuda.init()\na = make(100 << 20)\nb = make(50 << 20)\n"
    "torch.cuda.memory._fake_free(a)\n'done'",                                                      # 2 [3]
    "[c[1] for c in torch._calls if c[0] == 'record'], torch._C._cuda_isHistoryEnabled()",        # 3 [4]
    "torch.cuda.memory._record_memory_history(max_entries=777)\nc = make(1 << 20)",                # 4 [5]
    "%%vramscope\nd = make(30 << 20)\n'recorded'",                                                 # 5 [6]
    "torch._C._cuda_isHistoryEnabled(), torch.cuda.memory._history['max_entries']",               # 6 [7]
    "torch.cuda.memory._record_memory_history(enabled=None)",                                      # 7 [8]
    "%%vramscope\ne = make(8 << 20)\nraise RuntimeError('CUDA out of memory (fake)')",             # 8 [9]
    "os.environ['VRAMSCOPE_BIN'] = '/nonexistent/vramscope'",                                       # 9 [10]
    "%%vramscope\nf = make(1 << 20)\n'still here'",                                                 # 10 [11]
    "os.environ['VRAMSCOPE_BIN'] = %r\ntorch._C._cuda_isHistoryEnabled()",                         # 11 [12]
    "%vramscope live --socket $SOCK --interval 0.2",                                               # 12 [13]
    "import time\ntime.sleep(1.5)\nlw = get_ipython().magics_manager.registry['VramscopeMagics'].live[0]\n"
    "lw.stop()\n(len(lw.samples) >= 3, lw.source, sorted(k for k, v in lw.samples[-1].items() if v is not None))",  # 13
]


@pytest.fixture(scope="module")
def gpu_nb(engine, tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu")
    sock = str(d / "d.sock")
    fake = FakeDaemon(sock)
    cells = list(GPU_CELLS)
    cells[11] = cells[11] % engine
    cells[12] = "SOCK = %r\n" % sock + cells[12]
    try:
        yield execute(cells, kernel_env(engine, VRAMSCOPE_SOCKET=str(d / "none.sock")))
    finally:
        fake.close()


def test_magic_records_the_cell_and_restores(gpu_nb):
    cell = gpu_nb.cells[2]
    assert not stderr(cell), stderr(cell)
    assert result(cell) == "'done'"
    data = report(cell)
    state = widget_state(gpu_nb, data)
    assert state["title"] == "cell [3]"
    assert state["top_lines"][0]["label"] == "cell [2], line 2 (make)"
    assert state["top_lines"][0]["peak_bytes"] == 150 << 20
    assert "peak during the cell 150.00 MiB" in state["peak_line"]
    # the flame graph starts at the cell: IPython's and the magic's frames are cut
    root = state["tree"]["root"]
    assert {c["f"] for c in root["c"]} == {"cell [3]"}  # one per line of the cell
    assert sorted(c["l"] for c in root["c"]) == [3, 4]
    files = {n.get("f") or "" for n in tree_nodes(state["tree"])}
    assert not any("IPython" in f or "ipykernel" in f or "_magic" in f for f in files), files
    # recording started at CUDA init with our ring size, stopped after the cell
    records = result(gpu_nb.cells[3])
    assert "'max_entries': 5000" in records and "'enabled': None" in records
    assert records.rstrip().endswith("False)")


def test_magic_leaves_the_users_recording_alone(gpu_nb):
    cell = gpu_nb.cells[5]
    assert result(cell) == "'recorded'"
    state = widget_state(gpu_nb, report(cell))
    assert "recording was already on" in state["note"]
    # only the cell's event is in the trace; what was allocated before it (b, c) is
    # found by the engine in the segments, with their stacks
    assert state["facts"][0] == "cell [6]: 1 trace event"
    assert state["top_lines"][0]["peak_bytes"] == (30 + 50 + 1) << 20
    assert "+30.00 MiB over the 51.00 MiB in use at its start" in state["peak_line"]
    assert result(gpu_nb.cells[6]) == "(True, 777)"


def test_magic_reports_then_raises(gpu_nb):
    cell = gpu_nb.cells[8]
    kinds = [o.output_type for o in cell.outputs]
    assert kinds == ["display_data", "display_data", "error"], kinds  # static copy, widget, error
    assert cell.outputs[2].ename == "RuntimeError"
    state = widget_state(gpu_nb, report(cell))
    assert "raised RuntimeError" in state["note"]
    assert state["top_lines"][0]["label"] == "cell [2], line 2 (make)"


def test_magic_failure_never_loses_the_value(gpu_nb):
    cell = gpu_nb.cells[10]
    assert result(cell) == "'still here'"
    lines = stderr(cell).splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramscope: could not analyse the cell: VRAMSCOPE_BIN"), lines
    assert result(gpu_nb.cells[11]) == "False"  # and the recording it started is stopped


def test_live_samples_the_daemon_and_torch(gpu_nb):
    cell = gpu_nb.cells[12]
    assert not stderr(cell), stderr(cell)
    assert any(WIDGET in o.data for o in outputs(cell, "display_data"))
    ok, source, keys = eval(result(gpu_nb.cells[13]))
    assert ok and "daemon" in source and "torch" in source
    assert keys == ["allocated", "reserved", "t", "total", "used", "util"]
