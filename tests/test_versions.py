"""Version counters: an array that an op saved for backward and that was then changed in place
makes backward raise (as PyTorch does), instead of giving a wrong gradient in silence."""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim

MODIFIED = "modified by an inplace operation"


def _changed_under_no_grad(y):
    with mg.no_grad():
        y.add_(1.0)


def _changed_through_data(y):
    y.data[...] = 0.0


def _changed_by_data_update(y):
    y.data += 1.0


def _zeroed_under_no_grad(y):
    with mg.no_grad():
        y.zero_()


def _filled_under_no_grad(y):
    with mg.no_grad():
        y.masked_fill_(y > 1.0, 0.0)


def _changed_through_a_view(y):
    with mg.no_grad():
        y.view(-1)[0] = 5.0


CHANGES = [
    _changed_under_no_grad,
    _changed_through_data,
    _changed_by_data_update,
    _zeroed_under_no_grad,
    _filled_under_no_grad,
    _changed_through_a_view,
]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.strip("_") for c in CHANGES])
def test_changing_a_saved_array_then_backward_raises(change, device):
    x = mg.randn(2, 3, device=device, requires_grad=True)
    y = x.exp()  # exp saves its output y for backward: d exp(x)/dx = y
    change(y)
    with pytest.raises(RuntimeError, match=MODIFIED) as error:
        y.sum().backward()
    assert "Exp" in str(error.value) and "(2, 3)" in str(error.value)
    assert x.grad is None


def test_an_input_saved_by_an_op_counts_too(device):
    x = mg.randn(3, device=device, requires_grad=True)
    w = mg.randn(3, device=device)
    y = x * w  # Mul saves w: dL/dx = grad * w
    w.add_(1.0)  # (w needs no grad: a plain write)
    with pytest.raises(RuntimeError, match=r"Mul backward: .*" + MODIFIED):
        y.sum().backward()


def test_the_same_program_without_the_change_gives_torchs_gradient():
    torch = pytest.importorskip("torch")
    start = np.random.default_rng(0).standard_normal((2, 3))
    x = mg.tensor(start, dtype=mg.float64, requires_grad=True)
    y = x.exp()
    z = (y * y).sum()
    with mg.no_grad():
        y_plus = y + 1.0  # out of place: y itself is untouched
    z.backward()
    xt = torch.tensor(start, requires_grad=True)
    yt = xt.exp()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert np.allclose(y_plus.numpy(), y.numpy() + 1.0)


def test_torch_raises_on_the_same_change():
    torch = pytest.importorskip("torch")
    xt = torch.randn(2, 3, requires_grad=True)
    yt = xt.exp()
    with torch.no_grad():
        yt.add_(1.0)
    with pytest.raises(RuntimeError, match=MODIFIED):
        yt.sum().backward()


def test_a_change_recorded_in_the_graph_is_differentiated_not_refused(device):
    x = mg.randn(3, device=device, requires_grad=True)
    y = x.exp()
    y.add_(1.0)  # in grad mode: recorded as y = y + 1, exp's output kept as it was
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.numpy()), rtol=1e-6)


def test_optimizer_steps_between_iterations_never_raise(device):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(device)
    for make in (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.Adam(ps, lr=1e-2),
        lambda ps: optim.AdamW(ps, lr=1e-2),
    ):
        opt = make(model.parameters())
        for _ in range(3):
            loss = model(mg.randn(5, 4, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


def test_a_step_between_forward_and_backward_raises(device):
    model = nn.Linear(3, 2).to(device)
    opt = optim.SGD(model.parameters(), lr=0.1)
    model(mg.randn(4, 3, device=device)).sum().backward()
    loss = model(mg.randn(4, 3, device=device)).sum()
    opt.step()  # changes the weight that this forward saved
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


def test_replacing_data_is_not_a_change_of_the_saved_array(device):
    x = mg.randn(3, device=device, requires_grad=True)
    y = x.exp()
    saved = y.numpy().copy()
    y.data = mg.zeros(3, device=device)  # a new array: exp's saved one is untouched
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), saved, rtol=1e-6)
