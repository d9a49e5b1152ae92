"""200 tiny CUDA tests, none marked: what the plugin costs tests without a gate
(docs/gpu/integrations/README.md: this file with the plugin and with -p no:vramscope)."""
import pytest
import torch


@pytest.mark.parametrize("i", range(200))
def test_tiny(i):
    assert torch.full((4,), i, device="cuda").sum().item() == 4 * i
