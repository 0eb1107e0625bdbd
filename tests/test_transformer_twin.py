"""TransformerBlock and FeedForward against a PyTorch twin written here in plain torch.nn code
(not torch.nn.TransformerEncoderLayer; see tests/torch_twins.py). Forward outputs and every
gradient must agree in float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

torch = pytest.importorskip("torch")
from test_attention import (  # noqa: E402  (after the torch skip)
    ATOL,
    assert_same_gradients,
    load_into_torch,
    random_input,
    run_both,
)
from torch_twins import TorchBlock  # noqa: E402

TF = torch.nn.functional


# -- TransformerBlock -------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("residual", [True, False], ids=["residual", "no_residual"])
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu"])
def test_block_matches_torch(norm_first, residual, activation):
    mg.manual_seed(2)
    options = dict(norm_first=norm_first, residual=residual, activation=activation)
    block = nn.TransformerBlock(16, 4, **options)
    twin = TorchBlock(16, 4, **options)
    load_into_torch(twin, block)
    out_mg, out_torch, x_mg, x_torch = run_both(block, twin, random_input((2, 5, 16)))

    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=ATOL)
    np.testing.assert_allclose(x_mg.grad.numpy(), x_torch.grad.numpy(), atol=ATOL)
    assert_same_gradients(block, twin)


def test_block_parameter_names_and_default_d_ff():
    block = nn.TransformerBlock(8, 2)
    names = [name for name, _ in block.named_parameters()]
    assert names[:2] == ["attn.q_proj.weight", "attn.q_proj.bias"]
    assert {"ln1.weight", "ln2.bias", "ffn.fc1.weight", "ffn.fc2.bias"} <= set(names)
    assert block.ffn.fc1.weight.shape == (32, 8)


def test_block_dropout_is_active_only_in_training():
    mg.manual_seed(0)
    block = nn.TransformerBlock(8, 2, dropout=0.5)
    x = mg.randn(2, 4, 8)
    block.eval()
    np.testing.assert_array_equal(block(x).numpy(), block(x).numpy())
    block.train()
    assert not np.allclose(block(x).numpy(), block(x).numpy())


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_block_passes_the_float64_finite_difference_check(norm_first):
    """The whole block in float64: backward agrees with central differences in the input
    and in a weight (through attention, softmax, LayerNorm, GELU and both shortcuts)."""
    mg.manual_seed(4)
    block = nn.TransformerBlock(8, 2, d_ff=12, norm_first=norm_first).double()
    x = mg.randn(1, 3, 8, dtype=mg.float64, requires_grad=True)
    assert mg.gradcheck(lambda inp: block(inp), [x])
    # gradcheck perturbs the parameter itself, in place, so the block sees each change
    assert mg.gradcheck(lambda weight: block(x), [block.attn.q_proj.weight])
