"""Single steps of the recurrent networks, for loops written by hand: ``RNNCell``,
``LSTMCell`` and ``GRUCell``. Each computes one step of the equations in rnn.py and gru.py
(the same functions that the full networks loop over), with PyTorch's parameter names
``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` and initialisation
U(-1/sqrt(hidden), 1/sqrt(hidden)).
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import ops
from minigrad.backend import array_module
from minigrad.nn import init
from minigrad.nn.gru import gru_step
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.nn.rnn import lstm_step, rnn_step
from minigrad.tensor import Tensor


class _Cell(Module):
    gates = 1
    state_names = ("hx",)

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dtype = np.dtype(dtype or np.float32)
        rows = self.gates * hidden_size
        self.weight_ih = Parameter(np.empty((rows, input_size), dtype))
        self.weight_hh = Parameter(np.empty((rows, hidden_size), dtype))
        if bias:
            self.bias_ih = Parameter(np.empty(rows, dtype))
            self.bias_hh = Parameter(np.empty(rows, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _prepared(self, input: Tensor, hx) -> tuple:  # noqa: A002  (PyTorch's name)
        """input as (B, input_size), the states as (B, hidden) (zeros if None), and whether
        the input came without a batch dim."""
        name = type(self).__name__
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"{name}: expected input (B, {self.input_size}) or ({self.input_size},), "
                f"got {input.shape}"
            )
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        expected = (self.hidden_size,) if unbatched else (x.shape[0], self.hidden_size)
        if hx is None:
            zeros = array_module(x.array).zeros((x.shape[0], self.hidden_size), x.dtype)
            return x, [Tensor._make(zeros)] * len(self.state_names), unbatched
        given = list(hx) if isinstance(hx, (tuple, list)) else [hx]
        if len(given) != len(self.state_names):
            raise TypeError(
                f"{name}: expected the state as {' and '.join(self.state_names)}, "
                f"got {len(given)} tensors"
            )
        for state_name, state in zip(self.state_names, given):
            if state.shape != expected:
                raise RuntimeError(
                    f"{name}: {state_name} must have shape {expected}, got {state.shape}"
                )
        return x, [s.unsqueeze(0) if unbatched else s for s in given], unbatched

    def _from_input(self, x: Tensor) -> Tensor:
        return ops.linear(x, self.weight_ih, self.bias_ih)  # x W_ih^T + b_ih

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_Cell):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu).
    forward(input (B, input_size), hx (B, hidden) or None) -> h' (B, hidden)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", dtype=None):  # fmt: skip
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        super().__init__(input_size, hidden_size, bias, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, (h,), unbatched = self._prepared(input, hx)
        h = rnn_step(self._from_input(x), h, self.weight_hh, self.bias_hh, self.nonlinearity)
        return h[0] if unbatched else h


class LSTMCell(_Cell):
    """One LSTM step. forward(input (B, input_size), (h, c) or None) -> (h', c'), each
    (B, hidden)."""

    gates = 4
    state_names = ("h", "c")

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        x, (h, c), unbatched = self._prepared(input, hx)
        h, c = lstm_step(self._from_input(x), h, c, self.weight_hh, self.bias_hh)
        return (h[0], c[0]) if unbatched else (h, c)


class GRUCell(_Cell):
    """One GRU step. forward(input (B, input_size), hx (B, hidden) or None) -> h' (B, hidden)."""

    gates = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, (h,), unbatched = self._prepared(input, hx)
        h = gru_step(self._from_input(x), h, self.weight_hh, self.bias_hh)
        return h[0] if unbatched else h
