"""nn.Module and the simple layers: registration, names, state_dict, modes, devices, hooks,
the module-call records for graph drawing, initialisation, and each layer against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F


class Net(nn.Module):
    """A small module with a parameter, a buffer, a submodule and a list of submodules."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(mg.ones(3))
        self.register_buffer("count", mg.zeros(1))
        self.register_buffer("cache", mg.zeros(2), persistent=False)
        self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
        self.heads = nn.ModuleList([nn.Linear(3, 2), nn.Linear(3, 2, bias=False)])
        self.plain = [nn.Linear(3, 3)]  # a plain list hides its modules

    def forward(self, x):
        x = self.body(x) * self.scale
        return self.heads[0](x) + self.heads[1](x)


# -- registration and names -------------------------------------------------------------------


def test_named_parameters_are_dotted_and_in_order():
    names = [name for name, _ in Net().named_parameters()]
    assert names == [
        "scale",
        "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
        "heads.0.weight", "heads.0.bias", "heads.1.weight",
    ]  # fmt: skip


def test_parameters_are_leaves_that_require_grad():
    for param in Net().parameters():
        assert isinstance(param, nn.Parameter) and isinstance(param, mg.Tensor)
        assert param.requires_grad and param.is_leaf and param.dtype == np.float32
    assert not hasattr(nn.Parameter(mg.ones(1)), "__dict__")  # Tensor's __slots__ kept


def test_modules_children_and_buffers():
    net = Net()
    assert [name for name, _ in net.named_children()] == ["body", "heads"]
    assert [name for name, _ in net.named_modules()] == [
        "", "body", "body.0", "body.1", "body.2", "heads", "heads.0", "heads.1",
    ]  # fmt: skip
    assert len(list(net.modules())) == 8 and len(list(net.children())) == 2
    assert [name for name, _ in net.named_buffers()] == ["count", "cache"]


def test_shared_parameter_is_listed_once():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    net[1].weight = net[0].weight
    assert len(list(net.parameters())) == 3


def test_reassigning_an_attribute_moves_it_between_kinds():
    net = Net()
    net.body = mg.zeros(2)  # no longer a module
    assert "body" not in dict(net.named_children())
    del net.scale
    assert "scale" not in dict(net.named_parameters())
    with pytest.raises(TypeError, match="parameter 'weight'"):
        net.heads[0].weight = mg.zeros(2, 3)


def test_assigning_before_init_is_a_clear_error():
    class Broken(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match="super\\(\\).__init__\\(\\)"):
        Broken()


# -- state_dict ---------------------------------------------------------------------------------


def test_state_dict_holds_parameters_and_persistent_buffers():
    state = Net().state_dict()
    assert list(state) == [
        "scale", "count",
        "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
        "heads.0.weight", "heads.0.bias", "heads.1.weight",
    ]  # fmt: skip
    assert all(not value.requires_grad for value in state.values())


def test_state_dict_shares_memory_and_keep_vars_gives_the_parameters():
    net = Net()
    state = net.state_dict()
    assert np.shares_memory(state["scale"].array, net.scale.array)
    assert net.state_dict(keep_vars=True)["scale"] is net.scale


def test_load_state_dict_copies_in_place():
    source, target = Net(), Net()
    params_before = list(target.parameters())
    target.load_state_dict(source.state_dict())
    assert list(target.parameters()) == params_before  # the same objects: optimizers keep them
    x = mg.randn(2, 3)
    np.testing.assert_array_equal(target(x).numpy(), source(x).numpy())


def test_strict_load_names_every_missing_unexpected_and_mis_shaped_key():
    state = Net().state_dict()
    del state["body.0.bias"], state["heads.1.weight"]
    state["extra.weight"] = mg.zeros(1)
    state["body.2.weight"] = mg.zeros(5, 5)
    with pytest.raises(RuntimeError) as error:
        Net().load_state_dict(state)
    message = str(error.value)
    for key in ("body.0.bias", "heads.1.weight", "extra.weight", "body.2.weight"):
        assert key in message
    assert "missing" in message and "unexpected" in message
    assert "(5, 5)" in message and "(3, 4)" in message


def test_non_strict_load_reports_keys_but_still_refuses_wrong_shapes():
    state = Net().state_dict()
    del state["scale"]
    state["extra"] = mg.zeros(1)
    result = Net().load_state_dict(state, strict=False)
    assert result.missing_keys == ["scale"] and result.unexpected_keys == ["extra"]
    state["count"] = mg.zeros(7)
    with pytest.raises(RuntimeError, match="count"):
        Net().load_state_dict(state, strict=False)


# -- modes, gradients, devices -------------------------------------------------------------


def test_train_and_eval_reach_every_submodule():
    net = Net()
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_clears_every_parameter():
    net = Net()
    net(mg.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_to_double_and_back_keeps_the_same_parameter_objects():
    net = Net()
    params = list(net.parameters())
    net.double()
    assert all(p.dtype == np.float64 for p in net.parameters()) and net.count.dtype == np.float64
    assert list(net.parameters()) == params
    assert net(mg.randn(2, 3, dtype=mg.float64)).dtype == np.float64
    net.float()
    assert all(p.dtype == np.float32 for p in net.parameters())


def test_to_device(device):
    net = Net().to(device)
    assert all(p.device == device for p in net.parameters())
    assert all(b.device == device for b in net.buffers())
    assert net(mg.randn(2, 3).to(device)).device == device


def test_apply_visits_children_then_self():
    seen = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 4


# -- calling: hooks and the records for graph drawing ---------------------------------------------


def test_forward_hooks_run_and_can_be_removed():
    layer = nn.Linear(3, 2)
    calls = []
    pre = layer.register_forward_pre_hook(lambda m, args: calls.append(("pre", args[0].shape)))
    post = layer.register_forward_hook(lambda m, args, out: out * 0.0)  # replaces the output
    out = layer(mg.randn(4, 3))
    assert calls == [("pre", (4, 3))] and out.numpy().sum() == 0
    pre.remove(), post.remove()
    assert layer(mg.randn(4, 3)).numpy().any() and len(calls) == 1


def test_module_calls_mark_the_nodes_each_call_created():
    mg.manual_seed(0)
    net = Net()
    x = mg.randn(2, 3, requires_grad=True)
    out = net(x)
    records = out.grad_fn.module_calls
    assert records[-1].module() is net  # the outermost call finishes last
    outer = records[-1]
    assert outer.start <= out.grad_fn.seq < outer.end

    hidden = net.body(x)
    body_call = hidden.grad_fn.module_calls[-1]
    assert body_call.module() is net.body
    # every node between the Sequential's start and end belongs to it: walk the graph
    nodes, stack = [], [hidden.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in nodes:
            continue
        nodes.append(node)
        stack.extend(getattr(a, "grad_fn", None) for a in node.inputs)
    assert sorted(n.name for n in nodes) == ["Linear", "Linear", "Relu"]
    assert all(body_call.start <= n.seq < body_call.end for n in nodes)


def test_no_module_calls_under_no_grad_or_for_passed_through_outputs():
    layer = nn.Linear(3, 3)
    with mg.no_grad():
        assert layer(mg.randn(1, 3)).grad_fn is None
    dropout = nn.Dropout(0.5).eval()
    y = layer(mg.randn(1, 3))
    assert dropout(y) is y
    assert [call.module() for call in y.grad_fn.module_calls] == [layer]


def test_module_calls_reach_tensors_inside_nested_tuple_outputs():
    lstm = nn.LSTM(2, 3)
    output, (h, c) = lstm(mg.randn(1, 4, 2, requires_grad=True))
    for tensor in (output, h, c):
        assert tensor.grad_fn.module_calls[-1].module() is lstm


def test_repr_shows_structure_settings_and_parameter_counts():
    text = repr(nn.TransformerBlock(8, 2))
    assert text.startswith("TransformerBlock(  # 872 parameters")
    assert "(attn): MultiHeadAttention(  # 288 parameters" in text
    assert "(q_proj): Linear(in_features=8, out_features=8, bias=True)  # 72 parameters" in text
    assert "(dropout): Dropout(p=0.0)" in text


# -- containers --------------------------------------------------------------------------------


def test_sequential_and_module_list_behave_like_lists():
    seq = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
    seq.append(nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and len(seq[:2]) == 2
    assert seq(mg.randn(5, 2)).shape == (5, 1)
    items = nn.ModuleList([nn.Linear(1, 1)])
    items.extend([nn.ReLU(), nn.GELU()])
    items.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in items] == ["Tanh", "Linear", "ReLU", "GELU"]
    assert [name for name, _ in items.named_parameters()] == ["1.weight", "1.bias"]
    del items[1]
    assert len(list(items.parameters())) == 0


# -- layers and their PyTorch initialisation -----------------------------------------------------


def test_linear_and_embedding_initialisation_follow_pytorch():
    mg.manual_seed(0)
    linear = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    for param in (linear.weight, linear.bias):
        values = param.numpy()
        assert values.min() >= -bound and values.max() <= bound
        assert values.min() < -0.9 * bound and values.max() > 0.9 * bound
    assert linear.weight.numpy().std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    embedding = nn.Embedding(300, 200).weight.numpy()
    assert embedding.mean() == pytest.approx(0.0, abs=0.01)
    assert embedding.std() == pytest.approx(1.0, rel=0.02)


def test_seed_makes_initialisation_repeat():
    mg.manual_seed(7)
    first = nn.Linear(3, 3).weight.numpy()
    mg.manual_seed(7)
    np.testing.assert_array_equal(nn.Linear(3, 3).weight.numpy(), first)


def test_layer_norm_holds_weight_and_bias():
    norm = nn.LayerNorm(6)
    assert norm.weight.tolist() == [1.0] * 6 and norm.bias.tolist() == [0.0] * 6
    out = norm(mg.randn(4, 6) * 3 + 2).numpy()
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(out.std(-1), 1, atol=1e-3)


def test_dropout_scales_kept_values_and_is_identity_in_eval():
    mg.manual_seed(0)
    dropout = nn.Dropout(0.25)
    out = dropout(mg.ones(10000)).numpy()
    assert set(np.unique(out)) == {0.0, np.float32(1 / 0.75)}
    assert (out == 0).mean() == pytest.approx(0.25, abs=0.02)
    x = mg.ones(5)
    assert dropout.eval()(x) is x


def test_positional_encoding_is_sinusoidal_and_a_buffer():
    encoding = nn.PositionalEncoding(max_len=50, d_model=8)
    assert list(encoding.parameters()) == [] and "pe" in dict(encoding.named_buffers())
    x = mg.zeros(2, 10, 8)
    table = encoding(x).numpy()[0]
    pos, i = 7, 2  # PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...)
    angle = pos / 10000 ** (2 * i / 8)
    assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    with pytest.raises(ValueError, match="T <= 50"):
        encoding(mg.zeros(1, 51, 8))


def test_feed_forward_rejects_an_unknown_activation():
    with pytest.raises(ValueError, match="activation"):
        nn.FeedForward(4, 8, activation="swish")


@pytest.mark.parametrize(
    "make_layer, make_twin, shape",
    [
        (lambda: nn.Linear(5, 3), lambda t: t.nn.Linear(5, 3), (2, 4, 5)),
        (lambda: nn.LayerNorm(5), lambda t: t.nn.LayerNorm(5), (2, 4, 5)),
        (lambda: nn.GELU(), lambda t: t.nn.GELU(), (3, 5)),
        (lambda: nn.GELU("tanh"), lambda t: t.nn.GELU("tanh"), (3, 5)),
        (lambda: nn.FeedForward(5, 7, "relu"), None, (2, 3, 5)),
    ],
    ids=["linear", "layer_norm", "gelu", "gelu_tanh", "feed_forward_relu"],
)
def test_layers_match_torch(make_layer, make_twin, shape):
    torch = pytest.importorskip("torch")
    layer = make_layer()
    if make_twin is None:  # FeedForward: fc2(relu(fc1(x)))
        fc1, fc2 = torch.nn.Linear(5, 7), torch.nn.Linear(7, 5)
        twin = torch.nn.Sequential(fc1, torch.nn.ReLU(), fc2)
        state = layer.state_dict()
        renamed = {k.replace("fc1", "0").replace("fc2", "2"): v for k, v in state.items()}
        twin.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in renamed.items()})
    else:
        twin = make_twin(torch)
        twin.load_state_dict(
            {k: torch.from_numpy(v.numpy()) for k, v in layer.state_dict().items()}
        )
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x_mg, x_torch = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_mg, out_torch = layer(x_mg), twin(x_torch)
    np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=1e-5)
    (out_mg * out_mg).sum().backward()
    (out_torch * out_torch).sum().backward()
    np.testing.assert_allclose(x_mg.grad.numpy(), x_torch.grad.numpy(), atol=1e-4)


def test_functional_exports_the_design_list():
    for name in ("linear", "relu", "gelu", "softmax", "log_softmax", "cross_entropy", "mse_loss",
                 "layer_norm", "embedding", "dropout", "tanh", "sigmoid"):  # fmt: skip
        assert callable(getattr(F, name))


# -- clip_grad_norm_ ---------------------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")], ids=["l2", "l1", "max"])
@pytest.mark.parametrize("max_norm", [0.5, 100.0], ids=["clipped", "unchanged"])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4,), (2, 2))]
    params = [mg.zeros(*g.shape, requires_grad=True) for g in grads]
    twins = [torch.zeros(*g.shape, requires_grad=True) for g in grads]
    for p, t, g in zip(params, twins, grads):
        p.grad, t.grad = mg.tensor(g), torch.from_numpy(g.copy())
    total = nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    total_twin = torch.nn.utils.clip_grad_norm_(twins, max_norm, norm_type)
    assert isinstance(total, mg.Tensor) and total.shape == ()
    assert total.item() == pytest.approx(total_twin.item(), rel=1e-6)
    for p, t in zip(params, twins):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_clip_grad_norm_does_not_touch_shared_gradient_arrays():
    a, b = mg.ones(3, requires_grad=True), mg.ones(3, requires_grad=True)
    (a + b).sum().backward()  # the engine may hand both leaves one array
    nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    expected = 1.0 / math.sqrt(6)
    np.testing.assert_allclose(a.grad.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), expected, rtol=1e-5)
