"""nn.RNN and nn.LSTM against torch.nn.RNN / torch.nn.LSTM with the same weights: outputs,
final states and every gradient, batch-first or not, with and without initial states."""

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


def twin_of(module: nn.Module, kind: str, batch_first: bool, nonlinearity: str = "tanh"):
    options = dict(batch_first=batch_first)
    if kind == "rnn":
        twin = torch.nn.RNN(INPUT, HIDDEN, nonlinearity=nonlinearity, **options)
    else:
        twin = torch.nn.LSTM(INPUT, HIDDEN, **options)
    state = {name: torch.from_numpy(t.numpy().copy()) for name, t in module.state_dict().items()}
    twin.load_state_dict(state, strict=True)  # same names and shapes
    return twin


def flatten_outputs(result):
    """(output, h_n) or (output, (h_n, c_n)) as a flat list."""
    output, state = result
    return [output] + (list(state) if isinstance(state, tuple) else [state])


@pytest.mark.parametrize("kind", ["rnn", "rnn_relu", "lstm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "time_first"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "given_state"])
def test_matches_torch(kind, batch_first, with_state):
    mg.manual_seed(0)
    nonlinearity = "relu" if kind == "rnn_relu" else "tanh"
    if kind == "lstm":
        module = nn.LSTM(INPUT, HIDDEN, batch_first=batch_first)
    else:
        module = nn.RNN(INPUT, HIDDEN, batch_first=batch_first, nonlinearity=nonlinearity)
    twin = twin_of(module, "lstm" if kind == "lstm" else "rnn", batch_first, nonlinearity)

    rng = np.random.default_rng(1)
    batch, length = 2, 6
    shape = (batch, length, INPUT) if batch_first else (length, batch, INPUT)
    x = rng.standard_normal(shape).astype(np.float32)
    states = [rng.standard_normal((1, batch, HIDDEN)).astype(np.float32) for _ in range(2)]

    x_mg, x_torch = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    state_mg = state_torch = None
    if with_state:
        h_mg, h_torch = mg.tensor(states[0], requires_grad=True), torch.tensor(states[0])
        c_mg, c_torch = mg.tensor(states[1]), torch.tensor(states[1])
        state_mg = (h_mg, c_mg) if kind == "lstm" else h_mg
        state_torch = (h_torch, c_torch) if kind == "lstm" else h_torch
    outs_mg = flatten_outputs(module(x_mg, state_mg))
    outs_torch = flatten_outputs(twin(x_torch, state_torch))

    loss_mg, loss_torch = 0.0, 0.0
    for i, (out_mg, out_torch) in enumerate(zip(outs_mg, outs_torch)):
        assert out_mg.shape == tuple(out_torch.shape)
        np.testing.assert_allclose(out_mg.numpy(), out_torch.detach().numpy(), atol=ATOL)
        weights = rng.standard_normal(out_mg.shape).astype(np.float32)
        loss_mg = (out_mg * mg.tensor(weights)).sum() + loss_mg
        loss_torch = (out_torch * torch.from_numpy(weights)).sum() + loss_torch
    loss_mg.backward()
    loss_torch.backward()
    np.testing.assert_allclose(x_mg.grad.numpy(), x_torch.grad.numpy(), atol=ATOL)
    twin_params = dict(twin.named_parameters())
    for name, param in module.named_parameters():
        np.testing.assert_allclose(
            param.grad.numpy(), twin_params[name].grad.numpy(), atol=1e-4, err_msg=name
        )


def test_unbatched_input():
    module = nn.LSTM(INPUT, HIDDEN)
    output, (h, c) = module(mg.randn(4, INPUT))
    assert output.shape == (4, HIDDEN) and h.shape == (1, HIDDEN) and c.shape == (1, HIDDEN)
    np.testing.assert_allclose(output.numpy()[-1], h.numpy()[0])


def test_names_shapes_and_init_follow_pytorch():
    mg.manual_seed(0)
    lstm = nn.LSTM(INPUT, 64)
    shapes = {name: p.shape for name, p in lstm.named_parameters()}
    assert shapes == {
        "weight_ih_l0": (256, INPUT),
        "weight_hh_l0": (256, 64),
        "bias_ih_l0": (256,),
        "bias_hh_l0": (256,),
    }
    bound = 1 / math.sqrt(64)
    values = np.concatenate([p.numpy().ravel() for p in lstm.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert values.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)  # U(-b, b)


def test_wrong_input_or_state_shape_is_named():
    rnn = nn.RNN(INPUT, HIDDEN)
    with pytest.raises(ValueError, match="expected input"):
        rnn(mg.randn(2, 4, INPUT + 1))
    with pytest.raises(ValueError, match=r"h0 must have shape \(1, 2, 5\)"):
        rnn(mg.randn(2, 4, INPUT), mg.zeros(2, HIDDEN))
