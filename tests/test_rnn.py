"""nn.RNN, nn.LSTM, nn.GRU and their cells against torch's, with torch's weights copied in
through state_dict (so the names, shapes and order must be torch's): outputs, final states
and every gradient, time-first or batch-first, stacked and bidirectional, with and without
biases and initial states."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

ATOL = 1e-5
INPUT, HIDDEN = 3, 5

KINDS = {
    "rnn": (nn.RNN, torch.nn.RNN, {}),
    "rnn_relu": (nn.RNN, torch.nn.RNN, {"nonlinearity": "relu"}),
    "lstm": (nn.LSTM, torch.nn.LSTM, {}),
    "gru": (nn.GRU, torch.nn.GRU, {}),
}
CONFIGS = {
    "one_layer": {},
    "two_layers_bidirectional": {"num_layers": 2, "bidirectional": True},
    "two_layers_no_bias": {"num_layers": 2, "bias": False},
}


def copy_from_torch(module: nn.Module, twin) -> None:
    ours = [(k, tuple(v.shape)) for k, v in module.state_dict().items()]
    theirs = [(k, tuple(v.shape)) for k, v in twin.state_dict().items()]
    assert ours == theirs  # the same names and shapes, in the same order
    module.load_state_dict({k: mg.tensor(v.numpy()) for k, v in twin.state_dict().items()})


def flatten_outputs(result) -> list:
    """(output, h_n) or (output, (h_n, c_n)) as a flat list."""
    output, state = result
    return [output] + (list(state) if isinstance(state, tuple) else [state])


def assert_same_results(outs_mg, outs_torch, inputs_mg, inputs_torch, module, twin, seed=2):
    """Outputs agree; after backward of sum(out_i * w_i), so do the input and parameter
    gradients."""
    generator = np.random.default_rng(seed)
    loss_mg = loss_torch = 0.0
    assert len(outs_mg) == len(outs_torch)
    for out_mg, out_torch in zip(outs_mg, outs_torch):
        assert out_mg.shape == tuple(out_torch.shape)
        np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=ATOL)
        weights = generator.standard_normal(out_mg.shape).astype(np.float32)
        loss_mg = (out_mg * mg.tensor(weights)).sum() + loss_mg
        loss_torch = (out_torch * torch.from_numpy(weights)).sum() + loss_torch
    loss_mg.backward()
    loss_torch.backward()
    for ours, theirs in zip(inputs_mg, inputs_torch):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=ATOL)
    twin_params = dict(twin.named_parameters())
    for name, param in module.named_parameters():
        np.testing.assert_allclose(
            param.grad.numpy(), twin_params[name].grad.numpy(), atol=1e-4, err_msg=name
        )


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("batch_first", [False, True], ids=["time_first", "batch_first"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "given_state"])
def test_matches_torch(kind, config, batch_first, with_state):
    ours_class, torch_class, options = KINDS[kind]
    options = dict(options, **CONFIGS[config], batch_first=batch_first)
    torch.manual_seed(0)
    twin = torch_class(INPUT, HIDDEN, **options)
    module = ours_class(INPUT, HIDDEN, **options)
    copy_from_torch(module, twin)

    rng = np.random.default_rng(1)
    batch, length = 2, 4
    layers = options.get("num_layers", 1) * (2 if options.get("bidirectional") else 1)
    shape = (batch, length, INPUT) if batch_first else (length, batch, INPUT)
    x = rng.standard_normal(shape).astype(np.float32)
    inputs_mg, inputs_torch = (
        [mg.tensor(x, requires_grad=True)],
        [torch.tensor(x, requires_grad=True)],
    )
    state_mg = state_torch = None
    if with_state:
        count = 2 if kind == "lstm" else 1
        for _ in range(count):
            state = rng.standard_normal((layers, batch, HIDDEN)).astype(np.float32)
            inputs_mg.append(mg.tensor(state, requires_grad=True))
            inputs_torch.append(torch.tensor(state, requires_grad=True))
        state_mg = tuple(inputs_mg[1:]) if kind == "lstm" else inputs_mg[1]
        state_torch = tuple(inputs_torch[1:]) if kind == "lstm" else inputs_torch[1]
    outs_mg = flatten_outputs(module(inputs_mg[0], state_mg))
    outs_torch = flatten_outputs(twin(inputs_torch[0], state_torch))
    assert_same_results(outs_mg, outs_torch, inputs_mg, inputs_torch, module, twin)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_unbatched_input_matches_torch(kind):
    ours_class, torch_class, _ = KINDS[kind]
    twin = torch_class(INPUT, HIDDEN, num_layers=2)
    module = ours_class(INPUT, HIDDEN, num_layers=2)
    copy_from_torch(module, twin)
    x = np.random.default_rng(3).standard_normal((4, INPUT)).astype(np.float32)
    x_mg, x_torch = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    outs_mg, outs_torch = flatten_outputs(module(x_mg)), flatten_outputs(twin(x_torch))
    assert outs_mg[0].shape == (4, HIDDEN) and outs_mg[1].shape == (2, HIDDEN)
    assert_same_results(outs_mg, outs_torch, [x_mg], [x_torch], module, twin)


def test_dropout_between_layers_is_active_only_in_training():
    mg.manual_seed(0)
    gru = nn.GRU(INPUT, HIDDEN, num_layers=2, dropout=0.5)
    x = mg.randn(4, 2, INPUT)
    assert not np.allclose(gru(x)[0].numpy(), gru(x)[0].numpy())
    gru.eval()
    np.testing.assert_array_equal(gru(x)[0].numpy(), gru(x)[0].numpy())
    one_layer = nn.GRU(INPUT, HIDDEN, dropout=0.5)  # no layer above: nothing to drop
    np.testing.assert_array_equal(one_layer(x)[0].numpy(), one_layer(x)[0].numpy())


def test_the_default_layout_is_time_first_as_in_pytorch():
    for module in (nn.RNN(INPUT, HIDDEN), nn.LSTM(INPUT, HIDDEN), nn.GRU(INPUT, HIDDEN)):
        assert module.batch_first is False
        output, _ = module(mg.randn(7, 2, INPUT))  # (T, B, features)
        assert output.shape == (7, 2, HIDDEN)


@pytest.mark.parametrize("kind", ["rnn", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_cells_match_torch(kind, bias, batched):
    cells = {
        "rnn": (nn.RNNCell, torch.nn.RNNCell, {}),
        "rnn_relu": (nn.RNNCell, torch.nn.RNNCell, {"nonlinearity": "relu"}),
        "lstm": (nn.LSTMCell, torch.nn.LSTMCell, {}),
        "gru": (nn.GRUCell, torch.nn.GRUCell, {}),
    }
    ours_class, torch_class, options = cells[kind]
    twin = torch_class(INPUT, HIDDEN, bias=bias, **options)
    cell = ours_class(INPUT, HIDDEN, bias=bias, **options)
    copy_from_torch(cell, twin)
    assert [n for n, _ in cell.named_parameters()] == [n for n, _ in twin.named_parameters()]
    rng = np.random.default_rng(4)
    lead = (3,) if batched else ()
    x = rng.standard_normal(lead + (INPUT,)).astype(np.float32)
    states = [rng.standard_normal(lead + (HIDDEN,)).astype(np.float32) for _ in range(2)]
    inputs_mg = [mg.tensor(a, requires_grad=True) for a in [x] + states]
    inputs_torch = [torch.tensor(a, requires_grad=True) for a in [x] + states]
    # two steps, the second from the first's state, as a hand-written loop does
    if kind == "lstm":
        state_mg, state_torch = tuple(inputs_mg[1:]), tuple(inputs_torch[1:])
        for _ in range(2):
            state_mg = cell(inputs_mg[0], state_mg)
            state_torch = twin(inputs_torch[0], state_torch)
        outs_mg, outs_torch = list(state_mg), list(state_torch)
    else:
        inputs_mg, inputs_torch = inputs_mg[:2], inputs_torch[:2]
        h_mg, h_torch = cell(inputs_mg[0], inputs_mg[1]), twin(inputs_torch[0], inputs_torch[1])
        outs_mg, outs_torch = [cell(inputs_mg[0], h_mg)], [twin(inputs_torch[0], h_torch)]
    assert_same_results(outs_mg, outs_torch, inputs_mg, inputs_torch, cell, twin)
    assert cell(inputs_mg[0].detach()) is not None  # a zero state when none is given


def test_gru_passes_the_float64_finite_difference_check():
    mg.manual_seed(1)
    gru = nn.GRU(2, 3, num_layers=2, bidirectional=True).double()
    x = mg.randn(3, 1, 2, dtype=mg.float64, requires_grad=True)
    h0 = mg.randn(4, 1, 3, dtype=mg.float64, requires_grad=True)
    assert mg.gradcheck(lambda x, h: gru(x, h)[0], [x, h0])
    assert mg.gradcheck(lambda w: gru(x, h0)[1], [gru.weight_hh_l1_reverse])


def test_names_shapes_and_init_follow_pytorch():
    mg.manual_seed(0)
    lstm = nn.LSTM(INPUT, 64, num_layers=2, bidirectional=True)
    twin = torch.nn.LSTM(INPUT, 64, num_layers=2, bidirectional=True)
    shapes = {name: p.shape for name, p in lstm.named_parameters()}
    assert shapes == {name: tuple(p.shape) for name, p in twin.named_parameters()}
    assert shapes["weight_ih_l1_reverse"] == (256, 128)
    bound = 1 / math.sqrt(64)
    values = np.concatenate([p.numpy().ravel() for p in lstm.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert values.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)  # U(-b, b)


def test_wrong_input_or_state_shape_is_named():
    rnn = nn.RNN(INPUT, HIDDEN)
    with pytest.raises(RuntimeError, match="expected input"):
        rnn(mg.randn(2, 4, INPUT + 1))
    with pytest.raises(RuntimeError, match=r"h0 must have shape \(1, 4, 5\)"):
        rnn(mg.randn(2, 4, INPUT), mg.zeros(2, HIDDEN))
    with pytest.raises(TypeError, match="h0 and c0"):
        nn.LSTM(INPUT, HIDDEN)(mg.randn(2, 4, INPUT), mg.zeros(1, 4, HIDDEN))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(INPUT, HIDDEN, nonlinearity="sigmoid")
    with pytest.raises(RuntimeError, match=r"hx must have shape \(3, 5\)"):
        nn.GRUCell(INPUT, HIDDEN)(mg.randn(3, INPUT), mg.zeros(2, HIDDEN))
