"""PyTorch's nn layers and functional losses that learners' programs use, each against torch
itself: the same weights (copied through state_dict), the same inputs, the same outputs and
the same gradients of inputs and parameters; the composed functions also by finite
differences in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradients, compare_with_torch

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
TF = torch.nn.functional


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def copy_weights(module: nn.Module, twin) -> None:
    """torch's state_dict into minigrad's module: strict, so every name and shape must agree."""
    module.load_state_dict({k: mg.tensor(v.numpy()) for k, v in twin.state_dict().items()})


def assert_same_state_names(module: nn.Module, twin) -> None:
    ours = [(k, tuple(v.shape)) for k, v in module.state_dict().items()]
    theirs = [(k, tuple(v.shape)) for k, v in twin.state_dict().items()]
    assert ours == theirs


def assert_same_parameter_grads(module: nn.Module, twin, atol: float = 1e-5) -> None:
    twin_params = dict(twin.named_parameters())
    names = [name for name, _ in module.named_parameters()]
    assert names == list(twin_params)
    for name, param in module.named_parameters():
        expected = twin_params[name].grad
        assert param.grad is not None, name
        np.testing.assert_allclose(param.grad.numpy(), expected.numpy(), atol=atol, err_msg=name)


def backward_of_weighted_sum(outputs_mg, outputs_torch, seed: int = 5) -> None:
    """backward of sum(out_i * w_i) over the outputs, with the same random w_i in both."""
    generator = rng(seed)
    total_mg = total_torch = 0.0
    for ours, theirs in zip(outputs_mg, outputs_torch):
        weights = generator.standard_normal(ours.shape).astype(np.float32)
        total_mg = total_mg + (ours * mg.tensor(weights)).sum()
        total_torch = total_torch + (theirs * torch.from_numpy(weights)).sum()
    total_mg.backward()
    total_torch.backward()


# -- activations ------------------------------------------------------------------------------

ACTIVATIONS = {
    "silu": (F.silu, TF.silu),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu),
    "leaky_relu_0.2": (lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    "elu": (F.elu, TF.elu),
    "elu_alpha": (lambda x: F.elu(x, alpha=0.5), lambda x: TF.elu(x, alpha=0.5)),
    "softplus": (F.softplus, TF.softplus),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0, threshold=3.0),
                      lambda x: TF.softplus(x, beta=2.0, threshold=3.0)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_matches_torch_and_finite_differences(name):
    ours, theirs = ACTIVATIONS[name]
    x = rng().standard_normal((4, 5)) * 3
    compare_with_torch(ours, theirs, x)
    compare_with_torch(ours, theirs, x, dtype=np.float32)
    check_gradients(ours, (3, 4), domain="away_from_zero")


def test_activations_stay_finite_far_out():
    x = mg.tensor([-200.0, -50.0, 0.0, 50.0, 200.0], requires_grad=True)
    for function in (F.silu, F.elu, F.softplus, F.leaky_relu):
        x.grad = None
        y = function(x)
        y.sum().backward()
        assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all(), function


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (nn.SiLU(), torch.nn.SiLU()),
        (nn.LeakyReLU(0.1), torch.nn.LeakyReLU(0.1)),
        (nn.ELU(0.7), torch.nn.ELU(0.7)),
        (nn.Softplus(beta=1.5), torch.nn.Softplus(beta=1.5)),
        (nn.LogSoftmax(dim=1), torch.nn.LogSoftmax(dim=1)),
        (nn.LogSoftmax(dim=-1), torch.nn.LogSoftmax(dim=-1)),
    ],
    ids=lambda m: type(m).__name__,
)
def test_activation_layers_match_torch(ours, theirs):
    compare_with_torch(ours, theirs, (3, 4, 2))


# -- losses -----------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5), (4,)], ids=["rows", "spatial", "single"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_nll_loss_matches_torch(reduction, shape, weighted):
    generator = rng(1)
    classes = shape[0] if len(shape) == 1 else shape[1]
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    # log-probabilities, the class dim last, then moved to dim 1 as nll_loss expects
    log_probs = np.log(generator.dirichlet(np.ones(classes), size=target_shape))
    log_probs = np.ascontiguousarray(np.moveaxis(log_probs, -1, min(1, log_probs.ndim - 1)))
    target = generator.integers(0, classes, size=target_shape)
    if target.ndim:
        target.flat[0] = -100  # ignored
    weight = generator.uniform(0.5, 2.0, classes) if weighted else None

    def ours(x):
        w = mg.tensor(weight, dtype=x.dtype) if weighted else None
        return F.nll_loss(x, mg.tensor(target), weight=w, reduction=reduction)

    def theirs(x):
        w = torch.tensor(weight, dtype=x.dtype) if weighted else None
        return TF.nll_loss(x, torch.tensor(target), weight=w, reduction=reduction)

    compare_with_torch(ours, theirs, log_probs)
    check_gradients(ours, log_probs)
    layer = nn.NLLLoss(weight=mg.tensor(weight) if weighted else None, reduction=reduction)
    twin = torch.nn.NLLLoss(
        weight=torch.tensor(weight).float() if weighted else None, reduction=reduction
    )
    compare_with_torch(
        lambda x: layer(x, mg.tensor(target)),
        lambda x: twin(x, torch.tensor(target)),
        log_probs,
        dtype=np.float32,
    )


def test_log_softmax_then_nll_loss_is_cross_entropy():
    logits = mg.randn(5, 3, requires_grad=True)
    target = mg.tensor([0, 2, 1, 1, 0])
    composed = nn.NLLLoss()(nn.LogSoftmax(dim=1)(logits), target)
    np.testing.assert_allclose(composed.item(), F.cross_entropy(logits, target).item(), rtol=1e-6)


def test_nll_loss_with_every_target_ignored_is_nan_with_zero_gradient():
    x = mg.randn(3, 4, requires_grad=True)
    loss = F.nll_loss(x, mg.tensor([-100, -100, -100]))
    loss.backward()
    assert np.isnan(loss.item()) and not x.grad.numpy().any()


def test_nll_loss_errors_name_the_problem():
    x = mg.randn(3, 4)
    with pytest.raises(IndexError, match="target 4 is out of range for 4 classes"):
        F.nll_loss(x, mg.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"target of shape \(2,\)"):
        F.nll_loss(x, mg.tensor([0, 1]))
    with pytest.raises(TypeError, match="class indices"):
        F.nll_loss(x, mg.tensor([0.0, 1.0, 2.0]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_binary_cross_entropy_matches_torch(reduction, weighted):
    generator = rng(2)
    probs = generator.uniform(0.05, 0.95, (4, 3))
    targets = generator.uniform(0, 1, (4, 3))
    weight = generator.uniform(0.5, 2, (3,)) if weighted else None

    def ours(p, y):
        w = mg.tensor(weight, dtype=p.dtype) if weighted else None
        return F.binary_cross_entropy(p, y, weight=w, reduction=reduction)

    def theirs(p, y):
        w = torch.tensor(weight, dtype=p.dtype) if weighted else None
        return TF.binary_cross_entropy(p, y, weight=w, reduction=reduction)

    compare_with_torch(ours, theirs, probs, targets)
    check_gradients(ours, probs, targets)
    compare_with_torch(nn.BCELoss(reduction=reduction), torch.nn.BCELoss(reduction=reduction),
                       probs, targets, dtype=np.float32)  # fmt: skip


def test_binary_cross_entropy_clamps_its_logs_at_minus_100_and_checks_its_input():
    probs, targets = mg.tensor([0.0, 1.0, 0.5], requires_grad=True), mg.tensor([1.0, 0.0, 1.0])
    expected = TF.binary_cross_entropy(torch.tensor([0.0, 1.0, 0.5]), torch.tensor([1.0, 0.0, 1.0]))
    loss = F.binary_cross_entropy(probs, targets)
    np.testing.assert_allclose(loss.item(), expected.item())
    loss.backward()
    assert np.isfinite(probs.grad.numpy()).all()  # no log of 0 was taken
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(mg.tensor([1.5]), mg.tensor([1.0]))
    with pytest.raises(ValueError, match="shape"):
        F.binary_cross_entropy(mg.tensor([0.5, 0.5]), mg.tensor([1.0]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("extra", ["plain", "weight", "pos_weight"])
def test_binary_cross_entropy_with_logits_matches_torch(reduction, extra):
    generator = rng(3)
    logits = generator.standard_normal((5, 3)) * 4
    targets = generator.uniform(0, 1, (5, 3))
    weight = generator.uniform(0.5, 2, (5, 1)) if extra == "weight" else None
    pos_weight = generator.uniform(0.5, 3, (3,)) if extra == "pos_weight" else None

    def ours(x, y):
        w = mg.tensor(weight, dtype=x.dtype) if weight is not None else None
        pw = mg.tensor(pos_weight, dtype=x.dtype) if pos_weight is not None else None
        return F.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw)

    def theirs(x, y):
        w = torch.tensor(weight, dtype=x.dtype) if weight is not None else None
        pw = torch.tensor(pos_weight, dtype=x.dtype) if pos_weight is not None else None
        return TF.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw)

    compare_with_torch(ours, theirs, logits, targets)
    compare_with_torch(ours, theirs, logits, targets, dtype=np.float32)
    check_gradients(ours, logits, targets)


def test_bce_with_logits_is_stable_for_huge_logits():
    logits = mg.tensor([-1000.0, -80.0, 80.0, 1000.0], requires_grad=True)
    targets = mg.tensor([1.0, 0.0, 1.0, 0.0])
    loss = nn.BCEWithLogitsLoss(reduction="none")(logits, targets)
    loss.sum().backward()
    expected = TF.binary_cross_entropy_with_logits(
        torch.tensor(logits.numpy()), torch.tensor(targets.numpy()), reduction="none"
    )
    np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(logits.grad.numpy(), [-1.0, 0.0, 0.0, 1.0], atol=1e-6)


def test_bce_with_logits_layer_keeps_pos_weight_as_torch_does():
    layer = nn.BCEWithLogitsLoss(pos_weight=mg.ones(3))
    twin = torch.nn.BCEWithLogitsLoss(pos_weight=torch.ones(3))
    assert_same_state_names(layer, twin)


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True], ids=["prob_target", "log_target"])
def test_kl_div_matches_torch(reduction, log_target):
    generator = rng(4)
    log_q = np.log(generator.dirichlet(np.ones(5), size=4))
    p = generator.dirichlet(np.ones(5), size=4)
    target = np.log(p) if log_target else p

    def ours(x, y):
        return F.kl_div(x, y, reduction=reduction, log_target=log_target)

    def theirs(x, y):
        return TF.kl_div(x, y, reduction=reduction, log_target=log_target)

    compare_with_torch(ours, theirs, log_q, target)
    check_gradients(ours, log_q, target)
    layer = nn.KLDivLoss(reduction=reduction, log_target=log_target)
    twin = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    compare_with_torch(layer, twin, log_q, target, dtype=np.float32)


def test_kl_div_of_a_target_with_zeros_is_finite():
    log_q = mg.tensor(np.log([[0.2, 0.3, 0.5]]), requires_grad=True)
    p = mg.tensor([[0.0, 0.4, 0.6]])
    loss = F.kl_div(log_q, p, reduction="batchmean")
    loss.backward()
    expected = TF.kl_div(
        torch.tensor(log_q.numpy()), torch.tensor(p.numpy()), reduction="batchmean"
    )
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-6)
    assert np.isfinite(log_q.grad.numpy()).all()
    with pytest.raises(ValueError, match="batchmean"):
        F.kl_div(log_q, p, reduction="average")


# -- containers and reshaping layers -------------------------------------------------------------


def test_module_dict_registers_its_modules_under_their_keys():
    layers = nn.ModuleDict({"encoder": nn.Linear(2, 3), "act": nn.ReLU()})
    layers["decoder"] = nn.Linear(3, 1)
    twin = torch.nn.ModuleDict({"encoder": torch.nn.Linear(2, 3), "act": torch.nn.ReLU()})
    twin["decoder"] = torch.nn.Linear(3, 1)
    assert_same_state_names(layers, twin)
    copy_weights(layers, twin)
    assert list(layers) == ["encoder", "act", "decoder"] and "act" in layers and len(layers) == 3
    x = rng().standard_normal((4, 2)).astype(np.float32)
    out = layers["decoder"](layers["act"](layers["encoder"](mg.tensor(x))))
    expected = twin["decoder"](twin["act"](twin["encoder"](torch.tensor(x))))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), atol=1e-6)
    assert isinstance(layers.pop("act"), nn.ReLU) and list(layers.keys()) == ["encoder", "decoder"]
    del layers["decoder"]
    assert [name for name, _ in layers.named_parameters()] == ["encoder.weight", "encoder.bias"]


def test_parameter_list_and_dict_register_their_parameters():
    params = nn.ParameterList([nn.Parameter(mg.randn(2, 3)), mg.zeros(3)])
    params.append(nn.Parameter(mg.ones(1)))
    twin = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(2, 3)), torch.zeros(3)])
    twin.append(torch.nn.Parameter(torch.ones(1)))
    assert_same_state_names(params, twin)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)
    assert len(params) == 3 and params[-1].shape == (1,)

    table = nn.ParameterDict({"scale": nn.Parameter(mg.ones(4))})
    table["shift"] = nn.Parameter(mg.zeros(4))
    twin_table = torch.nn.ParameterDict({"scale": torch.nn.Parameter(torch.ones(4))})
    twin_table["shift"] = torch.nn.Parameter(torch.zeros(4))
    assert_same_state_names(table, twin_table)
    assert list(table) == ["scale", "shift"] and "shift" in table

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.ParameterList([nn.Parameter(mg.ones(2))])

        def forward(self, x):
            return x * self.weights[0]

    model = Model()
    model(mg.randn(3, 2)).sum().backward()
    assert [n for n, _ in model.named_parameters()] == ["weights.0"]
    assert model.weights[0].grad is not None
    with pytest.raises(TypeError, match="Parameter or a Tensor"):
        params.append(3.0)


@pytest.mark.parametrize(
    "ours, theirs, shape",
    [
        (nn.Flatten(), torch.nn.Flatten(), (2, 3, 4)),
        (nn.Flatten(0, 1), torch.nn.Flatten(0, 1), (2, 3, 4)),
        (nn.Unflatten(1, (3, 4)), torch.nn.Unflatten(1, (3, 4)), (2, 12)),
        (nn.Unflatten(-1, (2, -1)), torch.nn.Unflatten(-1, (2, -1)), (2, 3, 8)),
    ],
    ids=["flatten", "flatten_0_1", "unflatten", "unflatten_last"],
)
def test_flatten_and_unflatten_match_torch(ours, theirs, shape):
    compare_with_torch(ours, theirs, shape)


# -- BatchNorm1d ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(8, 4), (6, 4, 5)], ids=["NC", "NCL"])
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm_1d_matches_torch_in_both_modes(shape, momentum, affine):
    mg.manual_seed(0)
    torch.manual_seed(0)
    layer = nn.BatchNorm1d(4, momentum=momentum, affine=affine)
    twin = torch.nn.BatchNorm1d(4, momentum=momentum, affine=affine)
    assert_same_state_names(layer, twin)
    if affine:  # weights that are not the initial ones, the same in both
        with torch.no_grad():
            twin.weight.uniform_(0.5, 1.5)
            twin.bias.uniform_(-0.5, 0.5)
    copy_weights(layer, twin)
    generator = rng(6)
    for step in range(3):  # training: batch statistics, and the buffers move
        x = (generator.standard_normal(shape) * 2 + 1).astype(np.float32)
        x_mg, x_torch = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out_mg, out_torch = layer(x_mg), twin(x_torch)
        np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=1e-5)
        backward_of_weighted_sum([out_mg], [out_torch], seed=step)
        np.testing.assert_allclose(x_mg.grad.numpy(), x_torch.grad.numpy(), atol=1e-5)
        if affine:
            assert_same_parameter_grads(layer, twin)
            layer.zero_grad()
            twin.zero_grad()
    for name, buffer in twin.named_buffers():
        np.testing.assert_allclose(
            dict(layer.named_buffers())[name].numpy(), buffer.numpy(), rtol=1e-5, err_msg=name
        )
    assert layer.num_batches_tracked.item() == 3 and layer.num_batches_tracked.dtype == np.int64

    layer.eval()
    twin.eval()  # eval: the running statistics, and the buffers stay
    x = generator.standard_normal(shape).astype(np.float32)
    x_mg, x_torch = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_mg, out_torch = layer(x_mg), twin(x_torch)
    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=1e-5)
    backward_of_weighted_sum([out_mg], [out_torch])
    np.testing.assert_allclose(x_mg.grad.numpy(), x_torch.grad.numpy(), atol=1e-5)
    assert layer.num_batches_tracked.item() == 3


def test_batch_norm_without_running_stats_uses_the_batch_in_eval_too():
    layer = nn.BatchNorm1d(3, track_running_stats=False).eval()
    twin = torch.nn.BatchNorm1d(3, track_running_stats=False).eval()
    assert_same_state_names(layer, twin)
    compare_with_torch(layer, twin, (5, 3), dtype=np.float32)


def test_batch_norm_passes_the_finite_difference_check():
    layer = nn.BatchNorm1d(3).double()
    with mg.no_grad():
        layer.weight.array[...] = [0.5, 1.0, 2.0]
    check_gradients(lambda x: layer(x), (4, 3, 2))
    x = mg.randn(5, 3, dtype=mg.float64)
    # gradcheck perturbs the weight itself, in place, so the layer sees each change
    assert mg.gradcheck(lambda weight: layer(x), [layer.weight])


def test_batch_norm_2d_matches_torch():
    layer, twin = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert_same_state_names(layer, twin)
    compare_with_torch(layer, twin, (4, 3, 2, 2), dtype=np.float32)
    np.testing.assert_allclose(layer.running_var.numpy(), twin.running_var.numpy(), rtol=1e-5)


def test_batch_norm_errors_name_the_problem():
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.BatchNorm1d(3)(mg.randn(2, 3, 4, 5))
    with pytest.raises(ValueError, match="4 channels"):
        nn.BatchNorm1d(4)(mg.randn(2, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(mg.randn(1, 3))


# -- nn.MultiheadAttention ----------------------------------------------------------------------

MHA_CONFIGS = {
    "default": {},
    "kdim_vdim": {"kdim": 6, "vdim": 5},
    "no_bias": {"bias": False},
    "bias_kv_zero_attn": {"add_bias_kv": True, "add_zero_attn": True},
    "batch_first": {"batch_first": True},
}
MHA_MASKS = ["none", "bool", "float", "per_head", "float_padding"]


def mha_masks(kind: str, batch: int, heads: int, length: int, keys: int, generator):
    """(attn_mask, key_padding_mask) as numpy arrays, never masking a whole row."""
    if kind == "none":
        return None, None
    if kind == "bool":
        attn = generator.random((length, keys)) < 0.3
        padding = generator.random((batch, keys)) < 0.3
        attn[:, 0] = padding[:, 0] = False
        return attn, padding
    if kind == "float":
        return generator.standard_normal((length, keys)).astype(np.float32), None
    if kind == "per_head":
        attn = generator.random((batch * heads, length, keys)) < 0.3
        attn[..., 0] = False
        return attn, None
    padding = np.where(generator.random((batch, keys)) < 0.3, -np.inf, 0.0).astype(np.float32)
    padding[:, 0] = 0.0
    return None, padding


@pytest.mark.parametrize("config", list(MHA_CONFIGS))
@pytest.mark.parametrize("masks", MHA_MASKS)
@pytest.mark.parametrize("average", [True, False], ids=["averaged", "per_head_weights"])
def test_multihead_attention_matches_torch(config, masks, average):
    options = MHA_CONFIGS[config]
    torch.manual_seed(0)
    twin = torch.nn.MultiheadAttention(8, 2, **options)
    layer = nn.MultiheadAttention(8, 2, **options)
    assert_same_state_names(layer, twin)
    if options.get("bias", True):  # biases that are not zero, to check where they go
        with torch.no_grad():
            twin.in_proj_bias.uniform_(-0.5, 0.5)
            twin.out_proj.bias.uniform_(-0.5, 0.5)
    copy_weights(layer, twin)

    generator = rng(7)
    batch, length, keys = 3, 4, 5
    shapes = [(length, batch, 8), (keys, batch, options.get("kdim", 8)),
              (keys, batch, options.get("vdim", 8))]  # fmt: skip
    arrays = [generator.standard_normal(shape).astype(np.float32) for shape in shapes]
    if options.get("batch_first"):
        arrays = [np.ascontiguousarray(a.transpose(1, 0, 2)) for a in arrays]
    attn_mask, padding = mha_masks(masks, batch, 2, length, keys, generator)
    inputs_mg = [mg.tensor(a, requires_grad=True) for a in arrays]
    inputs_torch = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_mg, weights_mg = layer(*inputs_mg, key_padding_mask=padding, attn_mask=attn_mask,
                               average_attn_weights=average)  # fmt: skip
    out_torch, weights_torch = twin(
        *inputs_torch,
        key_padding_mask=None if padding is None else torch.from_numpy(padding),
        attn_mask=None if attn_mask is None else torch.from_numpy(attn_mask),
        average_attn_weights=average,
    )
    assert weights_mg.shape == tuple(weights_torch.shape)
    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(weights_mg.numpy(), weights_torch.detach().numpy(), atol=1e-6)
    backward_of_weighted_sum([out_mg, weights_mg], [out_torch, weights_torch])
    for ours, theirs in zip(inputs_mg, inputs_torch):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=1e-5)
    assert_same_parameter_grads(layer, twin)


def test_multihead_attention_unbatched_and_without_weights():
    twin = torch.nn.MultiheadAttention(8, 2)
    layer = nn.MultiheadAttention(8, 2)
    copy_weights(layer, twin)
    x = rng(8).standard_normal((4, 8)).astype(np.float32)
    padding = np.array([False, False, True, False])
    out_mg, weights_mg = layer(mg.tensor(x), mg.tensor(x), mg.tensor(x), key_padding_mask=padding)
    out_torch, weights_torch = twin(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(padding))
    assert out_mg.shape == (4, 8) and weights_mg.shape == (4, 4)
    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(weights_mg.numpy(), weights_torch.detach().numpy(), atol=1e-6)
    assert layer(*[mg.tensor(x)] * 3, need_weights=False)[1] is None


def test_multihead_attention_init_and_errors_follow_torch():
    layer = nn.MultiheadAttention(16, 4, add_bias_kv=True)
    assert not layer.in_proj_bias.numpy().any() and not layer.out_proj.bias.numpy().any()
    bound = np.sqrt(6 / (16 + 48))  # xavier_uniform_ of (3E, E)
    assert np.abs(layer.in_proj_weight.numpy()).max() <= bound
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    x = mg.randn(4, 2, 16)
    with pytest.raises(RuntimeError, match="is_causal"):
        layer(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \(3, 3\)"):
        layer(x, x, x, attn_mask=np.zeros((3, 3), bool))
    with pytest.raises(RuntimeError, match=r"key_padding_mask of shape \(4, 2\)"):
        layer(x, x, x, key_padding_mask=np.zeros((4, 2), bool))
    with pytest.raises(ValueError, match="features 16"):
        layer(x, mg.randn(4, 2, 8), x)


def test_multihead_attention_passes_the_finite_difference_check():
    mg.manual_seed(2)
    layer = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True).double()
    mask = np.array([[False, True, False], [False, False, True]])
    check_gradients(
        lambda q, k, v: layer(q, k, v, attn_mask=mask)[0], (2, 1, 4), (3, 1, 3), (3, 1, 5)
    )


# -- Transformer ----------------------------------------------------------------------------------

LAYER_CONFIGS = {
    "post_ln_relu": {},
    "pre_ln_gelu": {"norm_first": True, "activation": "gelu"},
    "batch_first": {"batch_first": True},
    "no_bias": {"bias": False},
}


def transformer_inputs(batch_first: bool, generator, lengths=(5, 4), batch=2, width=8):
    arrays = [generator.standard_normal((n, batch, width)).astype(np.float32) for n in lengths]
    if batch_first:
        arrays = [np.ascontiguousarray(a.transpose(1, 0, 2)) for a in arrays]
    return arrays


def run_twins(module, twin, arrays, **masks):
    """Forward both on the same inputs (masks as numpy arrays), compare the outputs, then
    after the same backward the gradients of inputs and parameters."""
    inputs_mg = [mg.tensor(a, requires_grad=True) for a in arrays]
    inputs_torch = [torch.tensor(a, requires_grad=True) for a in arrays]
    masks_mg = {k: None if v is None else mg.tensor(v) for k, v in masks.items()}
    masks_torch = {k: None if v is None else torch.from_numpy(v) for k, v in masks.items()}
    out_mg, out_torch = module(*inputs_mg, **masks_mg), twin(*inputs_torch, **masks_torch)
    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=2e-5)
    if not twin.training:
        return
    backward_of_weighted_sum([out_mg], [out_torch])
    for ours, theirs in zip(inputs_mg, inputs_torch):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=2e-5)
    assert_same_parameter_grads(module, twin, atol=5e-5)


@pytest.mark.parametrize("config", list(LAYER_CONFIGS))
def test_transformer_encoder_layer_matches_torch(config):
    options = dict(LAYER_CONFIGS[config], dim_feedforward=16, dropout=0.0)
    torch.manual_seed(1)
    twin = torch.nn.TransformerEncoderLayer(8, 2, **options)
    layer = nn.TransformerEncoderLayer(8, 2, **options)
    assert_same_state_names(layer, twin)
    copy_weights(layer, twin)
    generator = rng(9)
    (src,) = transformer_inputs(options.get("batch_first", False), generator, lengths=(5,))
    padding = generator.random((2, 5)) < 0.3
    padding[:, 0] = False
    causal = nn.Transformer.generate_square_subsequent_mask(5).numpy()
    run_twins(layer, twin, [src], src_mask=causal, src_key_padding_mask=padding)
    run_twins(layer, twin, [src])
    layer.eval()
    twin.eval()
    run_twins(layer, twin, [src], src_mask=causal)


@pytest.mark.parametrize("config", list(LAYER_CONFIGS))
def test_transformer_decoder_layer_matches_torch(config):
    options = dict(LAYER_CONFIGS[config], dim_feedforward=16, dropout=0.0)
    torch.manual_seed(2)
    twin = torch.nn.TransformerDecoderLayer(8, 2, **options)
    layer = nn.TransformerDecoderLayer(8, 2, **options)
    assert_same_state_names(layer, twin)
    copy_weights(layer, twin)
    generator = rng(10)
    tgt, memory = transformer_inputs(options.get("batch_first", False), generator, (4, 5))
    memory_padding = generator.random((2, 5)) < 0.3
    memory_padding[:, 0] = False
    causal = nn.Transformer.generate_square_subsequent_mask(4).numpy()
    run_twins(layer, twin, [tgt, memory], tgt_mask=causal, memory_key_padding_mask=memory_padding)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
def test_transformer_matches_torch(norm_first, batch_first):
    options = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                   dim_feedforward=16, dropout=0.0, norm_first=norm_first,
                   batch_first=batch_first)  # fmt: skip
    torch.manual_seed(3)
    twin = torch.nn.Transformer(**options)
    model = nn.Transformer(**options)
    assert_same_state_names(model, twin)
    names = [name for name, _ in model.named_parameters()]
    assert "encoder.layers.1.self_attn.in_proj_weight" in names
    assert {"encoder.norm.weight", "decoder.norm.bias", "decoder.layers.0.norm3.weight",
            "decoder.layers.1.multihead_attn.out_proj.weight"} <= set(names)  # fmt: skip
    copy_weights(model, twin)
    generator = rng(11)
    src, tgt = transformer_inputs(batch_first, generator, (5, 4))
    src_padding = generator.random((2, 5)) < 0.3
    src_padding[:, 0] = False
    causal = nn.Transformer.generate_square_subsequent_mask(4).numpy()
    run_twins(model, twin, [src, tgt], tgt_mask=causal, src_key_padding_mask=src_padding,
              memory_key_padding_mask=src_padding)  # fmt: skip


def test_transformer_init_masks_and_errors_follow_torch():
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(
        mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy()
    )
    assert mask.dtype == np.float32
    model = nn.Transformer(8, 2, 1, 1, 16)
    weight = model.encoder.layers[0].linear1.weight.numpy()
    assert np.abs(weight).max() <= np.sqrt(6 / (8 + 16))  # xavier_uniform_, as torch
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    stack = nn.TransformerEncoder(layer, 3)
    assert len(stack.layers) == 3 and stack.layers[0].linear1.weight is not layer.linear1.weight
    with pytest.raises(RuntimeError, match="batch number"):
        model(mg.randn(5, 2, 8), mg.randn(4, 3, 8))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    custom = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=F.silu)
    twin = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=TF.silu)
    copy_weights(custom, twin)
    run_twins(custom, twin, transformer_inputs(False, rng(12), lengths=(3,)))


def test_transformer_encoder_layer_passes_the_finite_difference_check():
    mg.manual_seed(4)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0).double()
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=mg.float64)
    check_gradients(lambda x: layer(x, src_mask=mask), (3, 1, 4))


# -- devices -------------------------------------------------------------------------------------


def device_cases():
    """(name, module factory, inputs factory, call): modules whose forward and backward are
    compared between the CPU and ``device``."""
    causal = nn.Transformer.generate_square_subsequent_mask(4).numpy()
    padding = np.array([[False, False, True, False, False]] * 2)
    return {
        "gru": (
            lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True),
            [(5, 2, 3)],
            lambda m, x: m(x)[0],
        ),
        "lstm_cell": (lambda: nn.LSTMCell(3, 4), [(2, 3)], lambda m, x: m(x)[1]),
        "batch_norm": (lambda: nn.BatchNorm1d(3), [(4, 3, 2)], lambda m, x: m(x)),
        "multihead": (
            lambda: nn.MultiheadAttention(8, 2, add_zero_attn=True),
            [(4, 2, 8), (5, 2, 8)],
            lambda m, q, kv: m(q, kv, kv, key_padding_mask=padding)[0],
        ),
        "transformer": (
            lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0),
            [(5, 2, 8), (4, 2, 8)],
            lambda m, s, t: m(s, t, tgt_mask=causal, src_key_padding_mask=padding),
        ),
        "cross_attention": (
            lambda: nn.MultiHeadAttention(8, 2, causal=True),
            [(2, 4, 8), (2, 5, 8)],
            lambda m, x, mem: m(x, memory=mem),
        ),
        "losses": (nn.BCEWithLogitsLoss, [(3, 4), (3, 4)], lambda m, x, y: m(x, y.sigmoid())),
    }


@pytest.mark.parametrize("case", list(device_cases()))
def test_layers_give_the_same_results_on_the_device(case, device):
    make, shapes, call = device_cases()[case]
    mg.manual_seed(0)
    on_cpu = make()
    on_device = make()
    on_device.load_state_dict(on_cpu.state_dict())
    on_device.to(device)
    arrays = [rng(i).standard_normal(shape).astype(np.float32) for i, shape in enumerate(shapes)]
    results = []
    for module, where in ((on_cpu, "cpu"), (on_device, device)):
        inputs = [mg.tensor(a, device=where, requires_grad=True) for a in arrays]
        out = call(module, *inputs)
        assert out.device == where
        (out * out).sum().backward()
        results.append((out.numpy(), [t.grad.numpy() for t in inputs],
                        [p.grad.numpy() for p in module.parameters()]))  # fmt: skip
    (out_a, grads_a, params_a), (out_b, grads_b, params_b) = results
    np.testing.assert_allclose(out_b, out_a, atol=1e-5)
    for a, b in zip(grads_a + params_a, grads_b + params_b):
        np.testing.assert_allclose(b, a, atol=1e-4)
