"""The pytest plugin (vramscope.pytest_plugin, loaded through its pytest11
entry point as an installed package's is) on pytest sessions run by pytester
in a child process, with the fake torch's allocator (faketorch: real Python
stacks in its trace, analysed by the real engine). The real CUDA run is on
the GPU machine (docs/gpu/integrations/README.md)."""
import json
import os

import pytest
from conftest import FAKETORCH, ROOT

pytest_plugins = ["pytester"]

ALLOC = "torch.cuda.memory._fake_alloc"
FREE = "torch.cuda.memory._fake_free"


def line_of(src, text, nth=0):
    """The line number of the nth line holding text, in the file pytester writes (stripped)."""
    return [i for i, ln in enumerate(src.strip().splitlines(), 1) if text in ln][nth]


@pytest.fixture
def run(pytester, monkeypatch):
    """Runs pytest on the given test file text in a child with the fake torch."""
    monkeypatch.setenv("PYTHONPATH", FAKETORCH)
    monkeypatch.setenv("VRAMSCOPE_BIN", os.path.join(ROOT, "bin", "vramscope"))
    monkeypatch.delenv("FAKE_TORCH_CPU", raising=False)

    def go(src, *args, name="test_gpu"):
        pytester.makepyfile(**{name: src})
        return pytester.runpytest_subprocess(*args)
    return go


OVER = """
import pytest, torch

@pytest.mark.vram_limit("2 MiB")
def test_big():
    a = %s(3 << 20)
    %s(a)

@pytest.mark.vram_limit("8 MiB")
def test_small():
    a = %s(3 << 20)
    %s(a)
""" % (ALLOC, FREE, ALLOC, FREE)


def test_limit_fails_with_the_line(run):
    r = run(OVER)
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    assert "vram_limit: peak allocated 3.00 MiB over the test's start exceeds the limit 2.00 MiB" in out
    assert "Top lines at the peak" in out
    assert "test_gpu.py:%d (test_big)" % line_of(OVER, "(3 << 20)") in out, out  # the line that allocated, from the recorded window
    assert "Snapshot: " in out


def test_limit_option_gates_unmarked_tests(run):
    src = "import torch\n\ndef test_plain():\n    a = %s(5 << 20)\n    %s(a)\n" % (ALLOC, FREE)
    run(src, "--vram-limit", "4MiB").assert_outcomes(failed=1)
    run(src, "--vram-limit", "6MiB").assert_outcomes(passed=1)


def test_leak(run):
    src = """
import pytest, torch
kept = []

@pytest.mark.vram_leak
def test_keeps():
    kept.append(%s(2 << 20))

@pytest.mark.vram_leak(tolerance="4 MiB")
def test_keeps_within_tolerance():
    kept.append(%s(2 << 20))

@pytest.mark.vram_leak
def test_frees():
    %s(%s(2 << 20))
""" % (ALLOC, ALLOC, FREE, ALLOC)
    r = run(src)
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "vram_leak: 2.00 MiB more allocated after the test than before it" in out
    assert "Lines holding memory when the test ended" in out, out
    assert "test_gpu.py:%d (test_keeps)" % line_of(src, "kept.append") in out, out


def test_baseline(run, pytester):
    base = str(pytester.path / "vram.json")
    src = "import torch\n\ndef test_model():\n    %s(%s(%d << 20))\n"
    r = run(src % (FREE, ALLOC, 10), "--vram-baseline", base)
    r.assert_outcomes(passed=1)
    assert "wrote 1 test peaks" in r.stdout.str()
    with open(base) as f:
        assert json.load(f)["peaks"] == {"test_gpu.py::test_model": 10 << 20}
    run(src % (FREE, ALLOC, 10), "--vram-baseline", base).assert_outcomes(passed=1)
    r = run(src % (FREE, ALLOC, 12), "--vram-baseline", base)  # +20%: over the 5% tolerance
    r.assert_outcomes(failed=1)
    assert "vram baseline: the test's peak over its start is 12.00 MiB, 2.00 MiB above the baseline 10.00 MiB" in r.stdout.str()
    run(src % (FREE, ALLOC, 12), "--vram-baseline", base, "--vram-baseline-tolerance", "25%").assert_outcomes(passed=1)
    run(src % (FREE, ALLOC, 12), "--vram-baseline", base, "--vram-baseline-update").assert_outcomes(passed=1)
    with open(base) as f:
        assert json.load(f)["peaks"]["test_gpu.py::test_model"] == 12 << 20


def test_limit_counts_the_tests_own_memory(run):
    # what an earlier test keeps is not the later test's (a 1 MiB-limit test that
    # allocated nothing failed on the H200 behind 337 MiB kept by others)
    src = ("import pytest, torch\n\nkept = []\n\ndef test_keeps():\n    kept.append(%s(8 << 20))\n\n"
           "@pytest.mark.vram_limit('1 MiB')\ndef test_nothing():\n    pass\n\n"
           "@pytest.mark.vram_limit('1 MiB')\ndef test_two():\n    %s(%s(2 << 20))\n") % (ALLOC, FREE, ALLOC)
    r = run(src)
    r.assert_outcomes(passed=2, failed=1)
    assert "peak allocated 2.00 MiB over the test's start exceeds the limit 1.00 MiB" in r.stdout.str()
    assert "peak 10.00 MiB, 8.00 MiB allocated when the test began" in r.stdout.str()


def test_baseline_outside_the_tests_tree(run, pytester, tmp_path_factory):
    # an existing --vram-baseline file outside the tests' folder moves pytest's
    # rootdir up (the H200 run's second nodeid was work/main/.../gates_demo.py::t)
    base = str(tmp_path_factory.mktemp("elsewhere") / "vram.json")
    src = "import torch\n\ndef test_model():\n    %s(%s(%d << 20))\n"
    run(src % (FREE, ALLOC, 10), "--vram-baseline", base).assert_outcomes(passed=1)
    with open(base) as f:
        (key,) = json.load(f)["peaks"]
    for _ in range(2):  # the grown peak is not stored under the new rootdir's key: it fails again
        r = run(src % (FREE, ALLOC, 12), "--vram-baseline", base)
        r.assert_outcomes(failed=1)
        assert "2.00 MiB above the baseline 10.00 MiB" in r.stdout.str()
        with open(base) as f:
            assert json.load(f)["peaks"] == {key: 10 << 20}
    run(src % (FREE, ALLOC, 12), "--vram-baseline", base, "--vram-baseline-update").assert_outcomes(passed=1)
    with open(base) as f:
        assert json.load(f)["peaks"] == {key: 12 << 20}  # updated under its first key


def test_cpu_only_runs_ungated(run, monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_CPU", "1")
    src = "import pytest\n\n@pytest.mark.vram_limit('1 MiB')\ndef test_cpu():\n    assert True\n"
    r = run(src)
    r.assert_outcomes(passed=1)
    assert "vramscope: 1 test(s) with GPU-memory gates ran without them: no CUDA device" in r.stdout.str()


def test_without_torch(run, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "")
    src = "import pytest\n\n@pytest.mark.vram_limit('1 MiB')\ndef test_cpu():\n    pass\n"
    r = run(src)
    r.assert_outcomes(passed=1)
    assert "ran without them: torch is not installed" in r.stdout.str()


def test_unmarked_tests_cost_nothing(run):
    """Without a gate the plugin never imports torch, nor touches CUDA."""
    src = "import sys\n\ndef test_plain():\n    assert 'torch' not in sys.modules\n"
    r = run(src)
    r.assert_outcomes(passed=1)
    assert "vramscope:" not in r.stdout.str()  # no header line, no summary line


def test_bad_size_is_a_usage_error(run):
    r = run("import pytest\n\n@pytest.mark.vram_limit('lots')\ndef test_x():\n    pass\n")
    assert "vram_limit of test_gpu.py::test_x 'lots': want a size such as 2GiB" in r.stdout.str() + r.stderr.str()
    r = run("def test_x():\n    pass\n", "--vram-limit", "2 parsecs")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--vram-limit '2 parsecs'" in r.stderr.str()
