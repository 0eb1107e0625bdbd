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


# -- cross-attention ------------------------------------------------------------------------


def torch_heads(layer, t, heads):
    """A projection of t (B, S, d) by a minigrad Linear, split into heads (B, H, S, d_k)."""
    projected = TF.linear(
        t, torch.from_numpy(layer.weight.numpy()), torch.from_numpy(layer.bias.numpy())
    )
    batch, length, width = projected.shape
    return projected.view(batch, length, heads, width // heads).transpose(1, 2)


@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "user_mask"])
def test_cross_attention_matches_torch(with_mask):
    """Queries from x (B, T, d), keys and values from memory (B, S, d), S != T; checked
    against torch's scaled_dot_product_attention with the same projections."""
    mg.manual_seed(3)
    attention = nn.MultiHeadAttention(8, 2)
    x, memory = random_input((2, 3, 8), seed=1), random_input((2, 5, 8), seed=2)
    mask = np.random.default_rng(4).random((2, 1, 3, 5)) < 0.7 if with_mask else None
    if with_mask:
        mask[..., 0] = True  # every query keeps a key
    x_mg, memory_mg = mg.tensor(x, requires_grad=True), mg.tensor(memory, requires_grad=True)
    out = attention(x_mg, mask=mask, memory=memory_mg)
    assert out.shape == (2, 3, 8) and attention.attn_weights.shape == (2, 2, 3, 5)

    x_t, memory_t = torch.tensor(x, requires_grad=True), torch.tensor(memory, requires_grad=True)
    q = torch_heads(attention.q_proj, x_t, 2)
    k, v = torch_heads(attention.k_proj, memory_t, 2), torch_heads(attention.v_proj, memory_t, 2)
    heads = TF.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.from_numpy(mask) if with_mask else None
    )
    expected = torch_heads(attention.o_proj, heads.transpose(1, 2).reshape(2, 3, 8), 1)[:, 0]
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), atol=ATOL)
    weights = np.random.default_rng(5).standard_normal((2, 3, 8)).astype(np.float32)
    (out * mg.tensor(weights)).sum().backward()
    (expected * torch.from_numpy(weights)).sum().backward()
    np.testing.assert_allclose(x_mg.grad.numpy(), x_t.grad.numpy(), atol=ATOL)
    np.testing.assert_allclose(memory_mg.grad.numpy(), memory_t.grad.numpy(), atol=ATOL)


def test_cross_attention_rejects_memory_of_another_batch_or_width():
    attention = nn.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="batch size"):
        attention(mg.randn(2, 3, 8), memory=mg.randn(3, 4, 8))
    with pytest.raises(ValueError, match=r"memory \(B, T, 8\)"):
        attention(mg.randn(2, 3, 8), memory=mg.randn(2, 4, 6))


# -- F.scaled_dot_product_attention ------------------------------------------------------------

SDPA_CASES = {
    "plain": {},
    "bool_mask": {"mask": "bool"},
    "float_mask": {"mask": "float"},
    "causal": {"is_causal": True},
    "scale": {"scale": 0.3},
    "gqa": {"enable_gqa": True, "kv_heads": 1},
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_scaled_dot_product_attention_matches_torch(case):
    from helpers import check_gradients, compare_with_torch

    options = dict(SDPA_CASES[case])
    mask_kind, kv_heads = options.pop("mask", None), options.pop("kv_heads", 2)
    rng = np.random.default_rng(6)
    q, k, v = (
        rng.standard_normal((2, 2, 3, 4)),
        rng.standard_normal((2, kv_heads, 5, 4)),
        rng.standard_normal((2, kv_heads, 5, 6)),
    )
    arrays = [q, k, v]
    if mask_kind == "bool":
        mask = rng.random((2, 1, 3, 5)) < 0.6
        mask[..., 0] = True
        arrays.append(mask)
    elif mask_kind == "float":
        arrays.append(rng.standard_normal((3, 5)))

    def ours(q, k, v, mask=None):
        return mg.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **options)

    def theirs(q, k, v, mask=None):
        return TF.scaled_dot_product_attention(q, k, v, attn_mask=mask, **options)

    compare_with_torch(ours, theirs, *arrays)
    compare_with_torch(ours, theirs, *arrays, dtype=np.float32)
    check_gradients(ours, *arrays)


def test_scaled_dot_product_attention_dropout_and_errors():
    q = mg.randn(1, 3, 4)
    np.testing.assert_array_equal(
        mg.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=1.0).numpy(), 0.0
    )
    with pytest.raises(RuntimeError, match="is_causal"):
        mg.nn.functional.scaled_dot_product_attention(
            q, q, q, attn_mask=np.ones((3, 3), bool), is_causal=True
        )
    with pytest.raises(ValueError, match="do not fit"):
        mg.nn.functional.scaled_dot_product_attention(q, mg.randn(1, 3, 5), q)
