"""The agent's stack sampler (vramscope.agent._stacks): what a sample keeps, the
wait markers, interning, dropping instead of blocking, and the live widget's
idle line from a report recorded on the H200 (docs/gpu/idle)."""
import json
import logging
import os
import threading
import time

from vramscope.agent import _stacks
from vramscope.notebook import _live

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_library_waits():
    sp = "/usr/lib/python3/site-packages/"
    assert _stacks.lib_wait(sp + "torch/utils/data/dataloader.py", "__next__") == "dataloader"
    assert _stacks.lib_wait(sp + "torch/utils/data/dataloader.py", "_try_get_data") == "dataloader_workers"
    assert _stacks.lib_wait(sp + "torch/utils/data/dataloader.py", "_next_data") == ""
    assert _stacks.lib_wait(sp + "torch/serialization.py", "save") == "checkpoint"
    assert _stacks.lib_wait(sp + "torch/distributed/distributed_c10d.py", "all_reduce") == "collective"
    assert _stacks.lib_wait(sp + "torch/cuda/__init__.py", "synchronize") == "sync"
    assert _stacks.lib_wait("/usr/lib/python3.12/logging/__init__.py", "emit") == "logging"


def test_line_waits():
    assert _stacks.text_wait("    v = loss.item()") == "sync"
    assert _stacks.text_wait("    preds = logits.argmax(1).cpu()") == "sync"
    assert _stacks.text_wait("    x = x.to(device)") == "copy"
    assert _stacks.text_wait("    x = x.to(device, non_blocking=True)") == ""
    assert _stacks.text_wait('    print("step", i)') == "logging"
    assert _stacks.text_wait("    out = model(x)") == ""


def test_user_files():
    dirs = _stacks._library_dirs()
    assert _stacks.is_user_file(os.path.abspath(__file__), dirs)
    assert not _stacks.is_user_file(logging.__file__, dirs)
    assert not _stacks.is_user_file(_stacks.__file__, dirs)  # the agent itself
    assert not _stacks.is_user_file("<frozen importlib._bootstrap>", dirs)
    assert _stacks.is_user_file("<ipython-input-3-abc>", dirs)


class _SlowHandler(logging.Handler):
    def emit(self, record):
        time.sleep(0.6)  # a slow log sink


def _log_slowly():
    log = logging.getLogger("vramscope-test-slow")
    log.propagate = False
    log.addHandler(_SlowHandler())
    log.warning("slow")


def test_sampler_batch():
    got = []
    s = _stacks.Sampler(lambda method, params: got.append((method, params)), hz=50)
    s.start()
    t = threading.Thread(target=_log_slowly, name="writer")
    t.start()
    time.sleep(0.6); n = "".item() if False else 0  # noqa: E702 (one line: the thread waits on a "sync")
    t.join()
    s.stop.set()
    s.thread.join(2)
    s.flush()
    assert n == 0 and got and all(m == "agent.stacks" for m, _ in got)
    waits, threads = {}, set()
    for _, p in got:
        keys = [(f["file"], f["line"], f["func"]) for f in p["frames"]]
        assert len(keys) == len(set(keys)), "frames are interned per batch"
        for x in p["samples"]:
            th = p["threads"][x["th"]]
            threads.add((th["name"], th.get("main", False)))
            top = p["frames"][x["s"][0]] if x.get("s") else None
            waits.setdefault((th["name"], x.get("w", "")), set()).add(top and (os.path.basename(top["file"]), top["func"]))
    assert ("MainThread", True) in threads and ("writer", False) in threads
    assert not any(name.startswith("vramscope-") for name, _ in threads)
    assert ("test_stacks.py", "test_sampler_batch") in waits.get(("MainThread", "sync"), set())
    assert ("test_stacks.py", "emit") in waits.get(("writer", "logging"), set())


def test_full_batch_drops(monkeypatch):
    monkeypatch.setattr(_stacks, "MAX_SAMPLES", 3)
    s = _stacks.Sampler(lambda m, p: None, hz=10)
    for _ in range(5):
        s.sample(-1)
    assert len(s.samples) == 3 and s.dropped >= 2


def test_idle_line_from_recorded_reports():
    with open(os.path.join(ROOT, "docs", "gpu", "idle", "slow_loader.report.json")) as f:
        text = _live.idle_text(json.load(f))
    assert text.startswith("GPU idle 77% of 11 s: waiting for the data loader at ")
    assert "slow_loader.py:14 49%" in text and "num_workers" in text
    with open(os.path.join(ROOT, "docs", "gpu", "idle", "healthy.report.json")) as f:
        assert _live.idle_text(json.load(f)) == ""


def test_live_copy_shows_the_idle_line():
    from vramscope.notebook import _livestatic

    with open(os.path.join(ROOT, "docs", "gpu", "idle", "slow_loader.report.json")) as f:
        line = _live.idle_text(json.load(f))
    state = {"samples": [], "running": False, "source": "GPU 0 counters from the daemon", "note": "", "idle": line,
             "device": 0, "total": 0, "interval": 1.0}
    assert "  " + line in _livestatic.plain(state).splitlines()
    assert "GPU idle 77% of 11 s: waiting for the data loader" in _livestatic.page(state, "k")
