"""Real CUDA tests for vramscope's pytest plugin (run explicitly, on a GPU:
`pytest examples/integrations/gates_demo.py`). Two of them are meant to fail
their gate: the output shows what a failing gate says (docs/gpu/integrations/README.md)."""
import os

import pytest
import torch

model = None  # a module-level model: its parameters outlive every test, as a fixture's would
kept = []


def mlp():
    global model
    if model is None:
        model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096)).cuda()
    return model


@pytest.mark.vram_limit("1 GiB")
def test_fits():
    x = torch.randn(8192, 4096, device="cuda")  # 128 MiB
    y = mlp()(x)
    assert y.shape == (8192, 4096)


@pytest.mark.vram_limit("1 GiB")
def test_batch_too_big():
    # meant to fail: 64k rows of activations are 1 GiB each, saved for backward
    x = torch.randn(65536, 4096, device="cuda")
    mlp()(x).sum().backward()


@pytest.mark.vram_leak
def test_keeps_outputs():
    # meant to fail: the outputs stay in a module-level list
    kept.append(mlp()(torch.randn(1024, 4096, device="cuda")).detach())


@pytest.mark.vram_leak
def test_frees_outputs():
    out = mlp()(torch.randn(1024, 4096, device="cuda"))
    del out


@pytest.mark.vram_limit("1 MiB")
def test_on_cpu():
    # no CUDA memory: passes on the GPU; on a machine without CUDA the gate is off
    assert torch.ones(1000).sum().item() == 1000


def test_unmarked():
    assert torch.ones(1, device="cuda").item() == 1


def test_grows_with_env():
    # --vram-baseline: GATES_DEMO_ROWS makes this test bigger on a second run
    rows = int(os.environ.get("GATES_DEMO_ROWS", "4096"))
    mlp()(torch.randn(rows, 4096, device="cuda"))
