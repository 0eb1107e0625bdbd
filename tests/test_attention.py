"""MultiHeadAttention against a PyTorch twin written here step by step, and against
torch's scaled_dot_product_attention as an independent oracle for the mask convention
(True = may attend).

The twin (tests/torch_twins.py) has the same parameter names, so minigrad's state_dict loads
into it with strict=True: that also checks the names. The helpers here are reused by the
block and GPT twin tests (test_transformer_twin.py, test_gpt.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny tensors: threads only add waiting, on a busy machine a lot
TF = torch.nn.functional

from torch_twins import TorchAttention, load_into_torch  # noqa: E402  (after the torch skip)

ATOL = 1e-4


def assert_same_gradients(module: nn.Module, twin, atol: float = ATOL) -> float:
    """Every parameter's gradient agrees; returns the largest difference."""
    worst = 0.0
    twin_params = dict(twin.named_parameters())
    for name, param in module.named_parameters():
        expected = twin_params[name].grad.numpy()
        difference = float(np.abs(param.grad.numpy() - expected).max())
        assert difference <= atol * (1 + np.abs(expected).max()), name
        worst = max(worst, difference)
    return worst


def run_both(module, twin, x: np.ndarray, *extra, device: str = "cpu"):
    """Forward and backward of sum(out * w) in both, minigrad's on ``device``; returns
    (mg out, torch out, mg x, torch x)."""
    module.to(device)
    x_mg = mg.tensor(x, requires_grad=True, device=device)
    x_torch = torch.tensor(x, requires_grad=True)
    out_mg = module(x_mg, *[mg.tensor(e, device=device) if e is not None else None for e in extra])
    out_torch = twin(x_torch, *[torch.from_numpy(e) if e is not None else None for e in extra])
    weights = np.random.default_rng(1).standard_normal(out_torch.shape).astype(np.float32)
    (out_mg * mg.tensor(weights, device=device)).sum().backward()
    (out_torch * torch.from_numpy(weights)).sum().backward()
    return out_mg, out_torch, x_mg, x_torch


def random_input(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- the tests ---------------------------------------------------------------------


def user_mask(batch: int, length: int, seed: int = 3) -> np.ndarray:
    """A random boolean mask (B, 1, T, T) with the diagonal allowed (no row fully masked)."""
    rng = np.random.default_rng(seed)
    mask = rng.random((batch, 1, length, length)) < 0.6
    mask |= np.eye(length, dtype=bool)
    return mask


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "user_mask"])
def test_attention_matches_torch(causal, with_mask, device):
    mg.manual_seed(0)
    attention = nn.MultiHeadAttention(16, 4, causal=causal)
    twin = TorchAttention(16, 4, causal)
    load_into_torch(twin, attention)
    mask = user_mask(2, 6) if with_mask else None
    x = random_input((2, 6, 16))
    out_mg, out_torch, x_mg, x_torch = run_both(attention, twin, x, mask, device=device)

    assert out_mg.shape == (2, 6, 16) and out_mg.device == device
    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=ATOL)
    np.testing.assert_allclose(
        attention.attn_weights.numpy(), twin.attn_weights.detach().numpy(), atol=ATOL
    )
    np.testing.assert_allclose(x_mg.grad.numpy(), x_torch.grad.numpy(), atol=ATOL)
    assert_same_gradients(attention, twin)


def test_attention_matches_scaled_dot_product_attention():
    """An independent oracle for the mask convention: True = may attend, as in SDPA."""
    mg.manual_seed(1)
    attention = nn.MultiHeadAttention(8, 2, causal=True)
    x = random_input((2, 5, 8))
    mask = user_mask(2, 5)
    out = attention(mg.tensor(x), mask=mask)

    def project(layer, t):
        return TF.linear(
            t, torch.from_numpy(layer.weight.numpy()), torch.from_numpy(layer.bias.numpy())
        )

    xt = torch.from_numpy(x)
    q, k, v = (
        project(p, xt).view(2, 5, 2, 4).transpose(1, 2)
        for p in (attention.q_proj, attention.k_proj, attention.v_proj)
    )
    allowed = torch.from_numpy(mask) & torch.tril(torch.ones(5, 5, dtype=torch.bool))
    heads = TF.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    expected = project(attention.o_proj, heads.transpose(1, 2).reshape(2, 5, 8))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=ATOL)


def test_attention_weights_are_causal_rows_that_sum_to_one():
    attention = nn.MultiHeadAttention(8, 2, causal=True)
    attention(mg.randn(3, 4, 8))
    weights = attention.attn_weights
    assert weights.shape == (3, 2, 4, 4)
    assert weights.grad_fn is None and not weights.requires_grad
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-6)
    assert np.all(np.triu(weights.numpy(), k=1) == 0)


@pytest.mark.parametrize(
    "mask, error",
    [
        (np.ones((3, 3), dtype=bool), "broadcast"),
        (np.ones((4, 4), dtype=np.float32), "boolean"),
    ],
    ids=["wrong_shape", "not_bool"],
)
def test_attention_rejects_a_bad_mask(mask, error):
    attention = nn.MultiHeadAttention(8, 2)
    with pytest.raises((ValueError, TypeError), match=error):
        attention(mg.randn(1, 4, 8), mask=mask)


def test_attention_needs_heads_that_divide_d_model():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(10, 3)
