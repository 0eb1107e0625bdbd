"""find_shortcuts: the residual connections of a graph, found from the graph alone.

An Add node y = a + b is a shortcut at a when b depends on a and on a parameter that a does
not depend on (docs/api.md, "What a gradient shortcut is, precisely").
"""

from __future__ import annotations

import math

import pytest

import minigrad as mg
from minigrad import nn
from minigrad.viz import find_shortcuts
from models import GPT, GPTConfig


def gpt_loss(n_layers: int, norm_first: bool, residual: bool = True):
    mg.manual_seed(0)
    config = GPTConfig(
        vocab_size=7,
        block_size=4,
        d_model=8,
        n_heads=2,
        n_layers=n_layers,
        norm_first=norm_first,
        residual=residual,
    )
    idx = mg.randint(0, 7, (1, 4))
    _, loss = GPT(config)(idx, idx)
    return loss


# -- composite twins of the fused ops, written from primitive ops only -----------------------


def composite_gelu_tanh(x):
    # x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    return x * 0.5 * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)).tanh())


def composite_layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    centered = x - mu
    variance = (centered * centered).mean(dim=-1, keepdim=True)
    return centered / (variance + eps).sqrt() * gamma + beta


def composite_softmax(x):
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def params(*shape):
    return mg.randn(*shape, requires_grad=True)


# -- transformers ----------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("n_layers", [1, 2, 3, 4, 5, 6])
def test_a_gpt_has_two_shortcuts_per_block(n_layers, norm_first):
    shortcuts = find_shortcuts(gpt_loss(n_layers, norm_first))
    assert len(shortcuts) == 2 * n_layers
    for shortcut in shortcuts:
        assert shortcut.node.name == "Add"
        assert shortcut.out.grad_fn is shortcut.node
        assert shortcut.node.inputs[shortcut.skip_position] is shortcut.skip
        assert shortcut.node.inputs[shortcut.branch_position] is shortcut.branch


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("n_layers", [1, 3, 6])
def test_a_gpt_without_residuals_has_none(n_layers, norm_first):
    assert find_shortcuts(gpt_loss(n_layers, norm_first, residual=False)) == []


def test_pre_ln_shortcuts_chain_along_the_residual_stream():
    # pre-LN: each shortcut's sum is the next one's skip: x -> x + O -> x + O + FFN -> ...
    shortcuts = find_shortcuts(gpt_loss(3, norm_first=True))
    for before, after in zip(shortcuts, shortcuts[1:]):
        assert after.skip is before.out


# -- no false positives in plain arithmetic --------------------------------------------------


def test_no_shortcut_inside_composite_gelu_layer_norm_or_softmax():
    mg.manual_seed(0)
    x = mg.randn(3, 8)
    hidden = x @ params(8, 8)  # every op below depends on this parameter
    y = composite_gelu_tanh(hidden)
    y = composite_layer_norm(y, params(8), params(8))
    y = composite_softmax(y @ params(8, 8))
    assert find_shortcuts(y.sum()) == []


def test_no_shortcut_when_the_branch_adds_no_parameter():
    h = mg.randn(4, 5) @ params(5, 5)
    assert find_shortcuts((h + h**3).sum()) == []  # u + 0.044715 u^3 in GELU
    assert find_shortcuts((h + h).sum()) == []
    assert find_shortcuts((h + params(5)).sum()) == []  # a bias: no dependence on h


def test_a_composite_transformer_block_has_exactly_two():
    """A block written by hand from primitive ops: found from the graph, not from modules."""
    mg.manual_seed(0)
    d = 8
    x = mg.randn(2, 4, d) @ params(d, d)
    q, k, v = x @ params(d, d), x @ params(d, d), x @ params(d, d)
    attended = composite_softmax(q @ k.transpose(-2, -1) / math.sqrt(d)) @ v
    z = composite_layer_norm(x + attended, params(d), params(d))
    transformed = composite_gelu_tanh(z @ params(d, 4 * d)) @ params(4 * d, d)
    out = composite_layer_norm(z + transformed, params(d), params(d))
    first, second = find_shortcuts(out.sum())
    assert first.skip is x and first.branch is attended
    assert second.skip is z and second.branch is transformed


# -- operand order, leaves, nesting ----------------------------------------------------------


def residual_pair():
    mg.manual_seed(0)
    h = mg.randn(4, 6) @ params(6, 6)
    branch = (h @ params(6, 6)).tanh()
    return h, branch


@pytest.mark.parametrize("order", ["h + F(h)", "F(h) + h"])
def test_operand_order_does_not_matter(order):
    h, branch = residual_pair()
    y = h + branch if order == "h + F(h)" else branch + h
    (shortcut,) = find_shortcuts(y.sum())
    assert shortcut.skip is h and shortcut.branch is branch and shortcut.out is y
    assert shortcut.skip_position == (0 if order == "h + F(h)" else 1)


def test_the_skip_may_be_an_input_leaf():
    x = mg.randn(4, 6, requires_grad=True)
    y = x + (x @ params(6, 6)).tanh()
    (shortcut,) = find_shortcuts(y)
    assert shortcut.skip is x


def test_nested_residuals_are_each_found():
    # y = x + G(x + F(x)): the inner shortcut at x, and the outer one at x too
    mg.manual_seed(0)
    x = mg.randn(3, 5) @ params(5, 5)
    inner = x + (x @ params(5, 5)).relu()
    outer = x + (inner @ params(5, 5)).tanh()
    first, second = find_shortcuts(outer.sum())
    assert first.out is inner and second.out is outer
    assert first.skip is x and second.skip is x


def test_module_code_and_the_shortcut_of_nn_transformer_block():
    block = nn.TransformerBlock(8, 2, norm_first=True)
    x = mg.randn(2, 3, 8, requires_grad=True)
    shortcuts = find_shortcuts(block(x).sum())
    assert len(shortcuts) == 2 and shortcuts[0].skip is x


def test_a_deep_graph_needs_no_recursion():
    # 3,000 residual blocks: 12,000 nodes, far past Python's recursion limit
    mg.manual_seed(0)
    h = mg.randn(1, 4, requires_grad=True)
    for _ in range(3000):
        h = h + (h @ params(4, 4)).tanh() * 0.1
    shortcuts = find_shortcuts(h.sum())
    assert len(shortcuts) == 3000


def test_a_weight_shared_by_every_block_counts_once():
    # the definition asks for a parameter the skip does not depend on: with one weight tied
    # across blocks, only the first block's branch brings it in
    mg.manual_seed(0)
    h = mg.randn(1, 4, requires_grad=True)
    weight = params(4, 4)
    for _ in range(3):
        h = h + (h @ weight).tanh()
    assert len(find_shortcuts(h.sum())) == 1
