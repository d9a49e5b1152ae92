"""The notebook side's parts, without a kernel: the shared renderer's copy, the
cost of `import vramscope`, finding the engine, cell-relative names from a real
IPython shell, narrowing a snapshot to a cell, and the live sampler against a
fake daemon. The static copy's parts: test_static_copy.py."""
import json
import os
import subprocess
import sys

import pytest

from conftest import PKG_PARENT, ROOT, require_module

require_module("IPython")  # the notebook extra: pip install -e './jupyter[test,notebook]'

from vramscope.notebook import _engine, _live, _magic, _names  # noqa: E402

WEB = os.path.join(ROOT, "profiler", "flame", "web")
STATIC = os.path.join(PKG_PARENT, "vramscope", "notebook", "static")


def _core_files():
    with open(os.path.join(WEB, "files.json"), encoding="utf-8") as f:
        core = json.load(f)
    # The page around the graph (part "page": page.css) is the CLI page's and the webview's only.
    return ["files.json"] + [s["file"] for s in core["scripts"] + core["styles"] if s["part"] != "page"]


@pytest.mark.parametrize("name", _core_files())
def test_bundled_renderer_is_the_shared_one(name):
    """The widget ships profiler/flame/web's core itself (no second renderer):
    static/ holds each file of files.json it loads (and the list) as a symlink into it,
    which the wheel resolves."""
    assert os.path.exists(os.path.join(STATIC, name)), "jupyter/vramscope/notebook/static/%s is missing: ln -s ../../../../profiler/flame/web/%s" % (name, name)
    with open(os.path.join(WEB, name), "rb") as a, open(os.path.join(STATIC, name), "rb") as b:
        assert a.read() == b.read(), "jupyter/vramscope/notebook/static/%s is not profiler/flame/web/%s" % (name, name)


def test_widget_module_is_flame_js_then_widget_js():
    require_module("anywidget")
    from vramscope.notebook import _widget

    esm = _widget.esm("widget.js")
    with open(os.path.join(WEB, "flame.js"), encoding="utf-8") as f:
        flame = f.read()
    assert flame in esm and esm.index(flame) < esm.index("export default")
    assert "http://" not in esm and "https://" not in esm  # nothing fetched at view time


def test_import_vramscope_stays_cheap():
    code = ("import sys, time; t = time.perf_counter(); import vramscope; dt = time.perf_counter() - t; "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'anywidget', 'ipywidgets', "
            "'traitlets', 'torch') or m.startswith('vramscope.')); print(repr(heavy)); print(dt)")
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    heavy, dt = out.splitlines()
    assert heavy == "[]", heavy
    assert hasattr(__import__("vramscope"), "load_ipython_extension")
    print("import vramscope: %.1f ms" % (float(dt) * 1000))


# --- the engine -----------------------------------------------------------------

def _exe(path, text="#!/bin/sh\necho engine\n"):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return str(path)


def test_find_binary_order(tmp_path, monkeypatch):
    env_bin = _exe(tmp_path / "env-vramscope", "\x7fELF")
    bundled = tmp_path / "pkg" / "bin"
    bundled.mkdir(parents=True)
    bundled_bin = _exe(bundled / "vramscope", "\x7fELF")
    path_dir = tmp_path / "path"
    path_dir.mkdir()
    on_path = _exe(path_dir / "vramscope", "\x7fELF")
    checkout = _exe(tmp_path / "checkout-vramscope", "\x7fELF")
    monkeypatch.setattr(_engine, "BUNDLED", bundled_bin)
    monkeypatch.setattr(_engine, "CHECKOUT", checkout)
    monkeypatch.setenv("PATH", str(path_dir))
    monkeypatch.setenv("VRAMSCOPE_BIN", env_bin)
    assert _engine.find_binary() == env_bin
    monkeypatch.delenv("VRAMSCOPE_BIN")
    assert _engine.find_binary() == bundled_bin
    os.remove(bundled_bin)
    assert _engine.find_binary() == on_path
    # a Python entry point named vramscope on PATH is not the engine
    _exe(path_dir / "vramscope", "#!/usr/bin/env python3\n")
    assert _engine.find_binary() == checkout
    os.remove(checkout)
    with pytest.raises(_engine.EngineError, match="not found"):
        _engine.find_binary()
    monkeypatch.setenv("VRAMSCOPE_BIN", str(tmp_path / "missing"))
    with pytest.raises(_engine.EngineError, match="not an executable"):
        _engine.find_binary()


def test_engine_errors_name_the_cause(tmp_path, monkeypatch):
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a pickle")
    if not os.path.exists(_engine.CHECKOUT) and not os.environ.get("VRAMSCOPE_BIN"):
        pytest.skip("no engine built")
    with pytest.raises(_engine.EngineError) as e:
        _engine.analyze(str(bad))
    assert str(e.value) and "Traceback" not in str(e.value)
    with pytest.raises(_engine.EngineError, match="weight"):
        _engine.flame(str(bad), "heaviest")


# --- cell-relative names ----------------------------------------------------------

@pytest.fixture(scope="module")
def shell():
    IPython = require_module("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    yield sh
    InteractiveShell.clear_instance()
    del IPython


def test_names_from_a_real_shell(shell):
    """IPython's own cell file names (<ipython-input-N-…> here; ipykernel's
    /tmp/ipykernel_PID/HASH.py in test_notebook.py) map to "cell [N]"."""
    shell.run_cell("import sys\n_f1 = sys._getframe().f_code.co_filename", store_history=True)
    shell.run_cell("def _g():\n    return sys._getframe().f_code.co_filename\n_f2 = _g()", store_history=True)
    f1, f2 = shell.user_ns["_f1"], shell.user_ns["_f2"]
    assert f1 != f2
    lab = _names.Labeler(_names.cell_files(shell))
    n1, n2 = lab.cell(f1), lab.cell(f2)
    assert isinstance(n1, int) and n2 == n1 + 1
    assert lab.label(f1, 5) == "cell [%d], line 5" % n1
    assert lab.label("/home/u/train.py", 7) == "/home/u/train.py:7"
    assert lab.real["cell [%d]" % n1] == f1
    assert lab.engine_names() == {f1: "cell [%d]" % n1, f2: "cell [%d]" % n2}


def test_engine_names_cells_in_its_own_texts():
    """The engine gets the cells' names (--names) and uses them in its texts:
    phase frames and finding titles say "cell [7]:70" while the files stay
    the recorded ones (no text is rewritten afterwards)."""
    from vramscope.notebook import _engine, _views

    snap = os.path.join(ROOT, "examples", "snapshots", "example_train.pickle")
    user = next(s["file"] for s in _engine.analyze(snap)["sites"] if s.get("file", "").endswith("record_examples.py"))
    view, _ = _views.snapshot_view(snap, labeler=_names.Labeler({user: 7}))
    names, stack = [], [view["tree"]["root"]]
    while stack:
        n = stack.pop()
        names.append(n.get("n", ""))
        stack.extend(n.get("c") or [])
    assert "[backward pass of cell [7]:70]" in names
    assert not any("record_examples.py:" in n for n in names)
    assert view["top_lines"][0]["label"].startswith("cell [7], line ")
    plain = _engine.flame(snap)
    assert "[backward pass of record_examples.py:70]" in json.dumps(plain)


def test_report_names_cells_as_its_tree(tmp_path):
    """The report of a real snapshot (analyze --report), relabelled, names the
    same files as the flame tree drawn with it: a moment's frames and a
    finding's lines select the tree's frames in the widget."""
    from vramscope.notebook import _engine

    snap = os.path.join(ROOT, "examples", "snapshots", "example_train.pickle")
    report, tree = _engine.report(snap), _engine.flame(snap)
    user = next(f["f"] for f in report["moments"]["frames"] if f.get("f", "").endswith("record_examples.py"))
    lab = _names.Labeler({user: 7})
    lab.report(report)
    lab.tree(tree)
    frames = {(f.get("f"), f.get("l")) for f in report["moments"]["frames"]}
    assert ("cell [7]", report["sites"][0]["line"]) in frames and report["sites"][0]["file"] == "cell [7]"
    assert not any(f == user for f, _ in frames)
    stack, tree_frames = [tree["root"]], set()
    while stack:
        n = stack.pop()
        tree_frames.add((n.get("f"), n.get("l")))
        stack.extend(n.get("c") or [])
    assert ("cell [7]", report["sites"][0]["line"]) in tree_frames


def test_names_of_cells_of_another_kernel():
    lab = _names.Labeler({})
    assert lab.label("<ipython-input-12-0a1b2c3d4e5f>", 3) == "cell [12], line 3"
    assert lab.label("/tmp/ipykernel_4242/123456789.py", 3) == "cell [?], line 3"
    assert lab.cell("/tmp/ipykernel_data/train.py") is None
    tree = {"root": {"n": "all", "v": 3, "c": [
        {"n": "<module>", "f": "<ipython-input-2-ffee>", "l": 4, "v": 3, "c": [
            {"n": "[backward pass of <ipython-input-2-ffee>:4]", "v": 1},
            {"n": "step", "f": "/usr/lib/python3/site-packages/torch/optim/adam.py", "l": 9, "v": 2}]}]}}
    lab.tree(tree)
    mod = tree["root"]["c"][0]
    assert mod["f"] == "cell [2]" and mod["l"] == 4
    # Phase names are the engine's (named with --names for this kernel's cells).
    assert mod["c"][0]["n"] == "[backward pass of <ipython-input-2-ffee>:4]"
    assert mod["c"][1]["f"].endswith("adam.py")


# --- narrowing a snapshot to the cell -------------------------------------------------

def test_trim_cuts_outer_frames_and_old_events():
    cell = "/tmp/ipykernel_1/22.py"
    frames = [{"filename": "lib.py", "line": 1, "name": "inner"}, {"filename": cell, "line": 3, "name": "<module>"},
              {"filename": "interactiveshell.py", "line": 9, "name": "run_code"},
              {"filename": "/tmp/ipykernel_1/11.py", "line": 1, "name": "<module>"}]
    snap = {"device_traces": [[{"action": "alloc", "time_us": 5, "frames": list(frames)},
                               {"action": "alloc", "time_us": 20, "frames": list(frames)},
                               {"action": "alloc", "time_us": 30, "frames": frames[:1]}]],
            "segments": [{"frames": list(frames), "blocks": [{"frames": list(frames)}]}]}
    _magic.trim(snap, 10, cell, drop_before=True)
    tr = snap["device_traces"][0]
    assert [e["time_us"] for e in tr] == [20, 30]
    assert [f["name"] for f in tr[0]["frames"]] == ["inner", "<module>"]
    assert tr[1]["frames"] == frames[:1]  # a stack outside the cell stays as it is
    assert len(snap["segments"][0]["blocks"][0]["frames"]) == 2


# --- the live sampler -----------------------------------------------------------------

def test_sampler_daemon_counters(tmp):
    from test_notebook import FakeDaemon

    sock = os.path.join(tmp, "d.sock")
    d = FakeDaemon(sock)
    try:
        s = _live.Sampler(interval=0.1, device=0, socket=sock)
        source, note = s.probe()
        assert "daemon" in source
        hist = s.history()
        assert hist and hist[0]["used"] == 5 << 30
        p = s.sample()
        assert p["used"] == 5 << 30 and p["util"] == 37 and p["total"] == 80 << 30
        assert s.idle().startswith("GPU idle 77% of 11 s: waiting for the data loader at ")
        s.close()
        assert d.calls[:2] == ["daemon.hello", "counters.devices"]
    finally:
        d.close()


# A leaking process's forecast as process.list carries it (the daemon's
# TestMemoryWarningEvent run: 1 MiB/step, a step every 70 ms, a 3 GiB cap).
LEAK_FORECAST = {"step": 1299, "projected_step": 1411, "projected_time": "2026-12-02T17:40:07.84Z", "steps_left": 112,
                 "seconds_left": 7.84, "bytes_per_step": 1048576.0, "bytes_per_second": 14979657.1,
                 "capacity": 3 << 30, "level": 2961178624, "warned": True, "eta_seconds": 95.2,
                 "evidence": {"from_step": 99, "to_step": 1299, "windows": 15, "window_steps": 80,
                              "consistency": 1.0, "third_slopes": [1048576, 1048576, 1048576],
                              "rise": 1174405120, "noise": 0}}


def test_sampler_warning_is_this_process_forecast(tmp):
    from test_notebook import FakeDaemon

    sock = os.path.join(tmp, "d.sock")
    d = FakeDaemon(sock)
    try:
        s = _live.Sampler(interval=0.1, device=0, socket=sock)
        s.probe()
        d.processes[:] = [{"pid": os.getpid() + 1, "agent": True, "forecast": dict(LEAK_FORECAST, warned=False)},
                          {"pid": os.getpid(), "agent": True}]
        assert s.warning() == ""  # another process grows, this one does not
        d.processes[1]["forecast"] = LEAK_FORECAST
        assert s.warning() == ("out of memory in 1m35s (step 1411): memory grows 1.00 MiB/step, 14.29 MiB/s "
                               "toward 3.00 GiB; the daemon warned and took a snapshot (vramscope snapshots)")
        s.close()
    finally:
        d.close()
    no_times = dict(LEAK_FORECAST, seconds_left=0, bytes_per_second=0, projected_time="0001-01-01T00:00:00Z", warned=False)
    assert _live.warning_text(no_times) == "out of memory in 112 steps (step 1411): memory grows 1.00 MiB/step toward 3.00 GiB"
    assert _live.warning_text(None) == ""


def test_sampler_without_daemon_says_why(tmp):
    s = _live.Sampler(socket=os.path.join(tmp, "none.sock"))
    source, note = s.probe()
    if "torch" in sys.modules:
        pytest.skip("torch imported in this process")
    assert source == "" and "no daemon at" in note and "vramscope serve" in note
    assert s.sample() is None


def test_without_anywidget_reports_are_static_html(monkeypatch):
    from vramscope.notebook import _widget

    monkeypatch.setattr(_widget, "anywidget_available", lambda: False)
    view = {"title": "t", "facts": ["f"], "top_lines": [], "findings": [],
            "tree": {"title": "t", "weight": "peak", "unit": "bytes", "root": {"n": "all", "v": 1}}}
    r = _widget.report(view)
    assert isinstance(r, _widget.Static) and _widget.last() is r
    b = r._repr_mimebundle_()
    assert set(b) == {"text/plain", "text/html"} and 'class="vs-flame"' in b["text/html"]


def test_report_of_an_oom_in_generation(tmp_path):
    """The notebook's findings of an OOM in generation (snaptool.py's kv_oom,
    through the real engine) say what the KV cache held and which batch and
    length fit, as the editor's diagnostic and the daemon's event do."""
    from vramscope.notebook import _report

    snap = str(tmp_path / "kv_oom.pickle")
    subprocess.run([sys.executable, os.path.join(ROOT, "profiler", "analyze", "testdata", "snaptool.py"), "synth",
                    "kv_oom", snap], check=True)
    rows = _report.findings(_engine.analyze(snap), None)
    oom = next(r for r in rows if r["kind"] == "oom")
    assert "the KV cache holds 1.56 MiB: batch 8 x 100 tokens, 2.00 KiB a token" in oom["title"]
    assert oom["fix"].startswith("the KV cache (past_key_values.layers[*].keys in generate) takes 2.00 KiB a token")
    assert "at 100 tokens a batch of" in oom["fix"] and "and at batch 8, " in oom["fix"]
    assert oom["where"] == "/workspace/proj/train.py:30"


def test_report_of_a_real_oom_in_generation(tmp_path):
    """The agent's capture of batch generate() out of a 3 GiB cap on the H200
    (GPT-2 medium, batch 32 x 512 tokens; examples/snapshots/inference/
    gen_oom.pickle.gz): the notebook's OOM row says the cache's size per token
    and a batch below the one that failed, on the generate() line."""
    import gzip
    import re
    import shutil

    from vramscope.notebook import _report

    snap = str(tmp_path / "gen_oom.pickle")
    with gzip.open(os.path.join(ROOT, "examples", "snapshots", "inference", "gen_oom.pickle.gz")) as src, \
            open(snap, "wb") as dst:
        shutil.copyfileobj(src, dst)
    rows = _report.findings(_engine.analyze(snap), None)
    oom = next(r for r in rows if r["kind"] == "oom")
    assert "the KV cache holds 1.50 GiB: batch 32 x 512 tokens, 96.00 KiB a token" in oom["title"]
    fits = int(re.search(r"at 512 tokens a batch of (\d+) fits", oom["fix"]).group(1))
    assert 16 <= fits < 32
    assert oom["where"].endswith("examples/inference/workloads.py:34")


def test_oom_finding_shows_the_plans_that_fit():
    """The agent's snapshot of an out-of-memory error (GPT-2 LoRA under a cap,
    examples/snapshots/oom/lora_gpt2.pickle), through the real engine: the
    notebook's finding carries the plans that fit, and both views show them."""
    from vramscope.notebook import _html, _report

    snap = os.path.join(ROOT, "examples", "snapshots", "oom", "lora_gpt2.pickle")
    rows = _report.findings(_engine.analyze(snap), None)
    oom = next(r for r in rows if r["kind"] == "oom")
    assert oom["plans"] and all(p["peak_reserved"] > 0 and p["cost"] for p in oom["plans"])
    assert any(p["title"].startswith("micro-batch 2 \u00d7 2 accumulation") for p in oom["plans"])
    assert oom["fix"].startswith("fits in ")
    view = {"title": "t", "facts": [], "top_lines": [], "findings": rows}
    assert "plans that fit (vramscope fit)" in _html.page(view)
    assert "fits with micro-batch 2 \u00d7 2 accumulation" in _html.plain(view)
