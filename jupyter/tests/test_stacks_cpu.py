"""The stack sampler in real CPU programs whose idle time is known (stacks_cpu.py):
two torch.distributed ranks (gloo) where rank 1 is slow, so rank 0 waits in
all_reduce; and a loop whose host-side share of the step is known. Each test
checks the samples the sampler took, then the daemon's join of them
(`vramscope idle --json` on the recording, with a utilisation series built
from the program's own clock). VRAMSCOPE_UPDATE_TESTDATA=1 writes the
recordings to profiler/idle/testdata, where profiler/idle's Go tests read
them."""
import json
import os
import subprocess
import sys

import pytest

from conftest import HERE, PKG_PARENT, ROOT, missing, torch_python

SCRIPT = os.path.join(HERE, "stacks_cpu.py")
BIN = os.path.join(ROOT, "bin", "vramscope")
TESTDATA = os.path.join(ROOT, "profiler", "idle", "testdata")
REL = os.path.relpath(SCRIPT, ROOT)


def marked_line(tag):
    """The line of stacks_cpu.py that carries `# TAG`."""
    with open(SCRIPT) as f:
        for n, text in enumerate(f, 1):
            if "# " + tag + ":" in text:
                return n
    raise AssertionError("no # %s: line in %s" % (tag, SCRIPT))


def env():
    return dict(os.environ, PYTHONPATH=PKG_PARENT, PYTHONUNBUFFERED="1", VRAMSCOPE_STACK_HZ="0")


def main_at(rec, line):
    """The training thread's samples whose innermost user frame is line of stacks_cpu.py."""
    return [s for s in rec["input"]["samples"]
            if s["main"] and s["stack"] and s["stack"][0]["file"] == REL and s["stack"][0]["line"] == line]


def join(tmp, rec, name):
    """The daemon's join of a recording (vramscope idle FILE --json); writes
    the recording to testdata when asked."""
    if not os.access(BIN, os.X_OK):
        missing("no %s (make build)" % BIN)
    path = os.path.join(tmp, name + ".input.json")
    with open(path, "w") as f:
        json.dump(rec["input"], f)
    if os.environ.get("VRAMSCOPE_UPDATE_TESTDATA") == "1":
        for suffix, v in ((".input.json", rec["input"]), (".facts.json", rec["facts"])):
            with open(os.path.join(TESTDATA, name + suffix), "w") as f:
                json.dump(v, f, indent=None if suffix == ".input.json" else 1)
                f.write("\n")
    res = subprocess.run([BIN, "idle", "--json", path], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_collective_wait_on_the_all_reduce_line(tmp_path):
    py = torch_python()
    init, outs = str(tmp_path / "store"), [str(tmp_path / ("rank%d.json" % r)) for r in (0, 1)]
    ranks = [subprocess.Popen([py, SCRIPT, "collective", str(r), init, outs[r]], env=env(), cwd=str(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (1, 0)]
    for p in ranks:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
    with open(outs[0]) as f:
        rec = json.load(f)
    waited_ms = sum(b - a for a, b in rec["idle_intervals_ms"])
    at_reduce = main_at(rec, marked_line("COLLECTIVE"))
    # Rank 0 waited about 1.2 s a step in all_reduce: the sampler (50 Hz) saw
    # it there, every sample marked as a collective wait.
    assert waited_ms > 4000, rec["idle_intervals_ms"]
    assert len(at_reduce) >= 0.5 * waited_ms / 20, (len(at_reduce), waited_ms)
    assert {s.get("wait") for s in at_reduce} == {"collective"}
    assert all(s.get("wait", "") != "collective" for s in rec["input"]["samples"]
               if s["main"] and s["stack"] and s["stack"][0]["func"] == "spin")

    r = join(str(tmp_path), rec, "collective_cpu")
    top = r["causes"][0]
    assert r["headline"], r
    assert (top["kind"], os.path.basename(top["site"]["file"]), top["site"]["line"]) == \
        ("collective", "stacks_cpu.py", marked_line("COLLECTIVE"))
    assert "slower ranks" in top["fix"]
    assert abs(r["idle_share"] - rec["facts"]["measure"]["idle_share_measured"]) < 0.02


@pytest.mark.parametrize("fraction,finding", [(0.02, False), (0.10, True)])
def test_sync_fraction(tmp_path, fraction, finding):
    out = str(tmp_path / "sync.json")
    res = subprocess.run([sys.executable, SCRIPT, "sync", str(fraction), out], env=env(), cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    with open(out) as f:
        rec = json.load(f)
    at_item = main_at(rec, marked_line("SYNC"))
    assert len(at_item) > 150 and {s.get("wait") for s in at_item} == {"sync"}
    measured = rec["facts"]["measure"]["idle_share_measured"]
    assert abs(measured - fraction) < 0.03 and (finding or measured < 0.05), measured  # the program did what it says

    r = join(str(tmp_path), rec, "sync_cpu_%02d" % round(100 * fraction))
    assert abs(r["idle_share"] - measured) < 0.01
    if not finding:
        assert not r.get("headline"), r["headline"]
        return
    top = r["causes"][0]
    assert (top["kind"], top["site"]["line"]) == ("sync", marked_line("SYNC")), top
    assert marked_line("HOST") in [ln["line"] for ln in top["lines"]], top["lines"]
