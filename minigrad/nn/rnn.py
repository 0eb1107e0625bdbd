"""Recurrent networks, the models the Transformer replaced: ``RNN`` and ``LSTM`` (one layer).

    RNN:   h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)

    LSTM:  i, f, g, o = split(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)   (gates in that order)
           i = sigmoid(i), f = sigmoid(f), g = tanh(g), o = sigmoid(o)
           c_t = f * c_{t-1} + i * g        (the cell state: a gated shortcut through time)
           h_t = o * tanh(c_t)

The gradient from step t back to step t-k passes k times through W_hh and tanh in the RNN;
in the LSTM it can pass along c instead, multiplied only by the forget gates f.
Parameter names, shapes, gate order and initialisation (U(-1/sqrt(hidden), 1/sqrt(hidden)))
are PyTorch's, so weights can be copied between the two.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import ops
from minigrad.backend import array_module
from minigrad.errors import ShapeError
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class _Recurrent(Module):
    """What RNN and LSTM share: the weights, the input layout, the loop over time."""

    gates = 1  # how many hidden-sized blocks the weights stack (4 for the LSTM)

    def __init__(self, input_size: int, hidden_size: int, batch_first: bool = True):
        super().__init__()
        self.input_size, self.hidden_size, self.batch_first = input_size, hidden_size, batch_first
        rows = self.gates * hidden_size
        self.weight_ih_l0 = Parameter(np.empty((rows, input_size), dtype=np.float32))
        self.weight_hh_l0 = Parameter(np.empty((rows, hidden_size), dtype=np.float32))
        self.bias_ih_l0 = Parameter(np.empty(rows, dtype=np.float32))
        self.bias_hh_l0 = Parameter(np.empty(rows, dtype=np.float32))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _batch_major(self, x: Tensor) -> tuple[Tensor, bool]:
        """x as (B, T, input_size), and whether it came without a batch dim."""
        if x.ndim == 2:
            return x.unsqueeze(0), True
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: expected input (B, T, {self.input_size}) "
                f"(or (T, B, {self.input_size}) with batch_first=False), got {x.shape}"
            )
        return (x if self.batch_first else x.transpose(0, 1)), False

    def _initial(self, state, batch: int, unbatched: bool, like: Tensor, name: str) -> Tensor:
        """An initial state (1, B, H) or (1, H) as (B, H); zeros when not given."""
        if state is None:
            zeros = array_module(like.array).zeros((batch, self.hidden_size), dtype=like.dtype)
            return Tensor._make(zeros)
        expected = (1, self.hidden_size) if unbatched else (1, batch, self.hidden_size)
        if state.shape != expected:
            raise ShapeError(
                f"{type(self).__name__}: {name} must have shape {expected}, got {state.shape}"
            )
        return state.reshape(batch, self.hidden_size)

    def _output(self, steps: list[Tensor], unbatched: bool) -> Tensor:
        """The per-step hidden states (each (B, H)) as the output tensor."""
        output = ops.stack(steps, dim=1)  # (B, T, H)
        if unbatched:
            return output[0]
        return output if self.batch_first else output.transpose(0, 1)

    @staticmethod
    def _final(state: Tensor, unbatched: bool) -> Tensor:
        return state.unsqueeze(0) if not unbatched else state  # (1, B, H) or (1, H)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, batch_first={self.batch_first}"


class RNN(_Recurrent):
    """Elman RNN. forward(x: (B, T, input_size), h0: (1, B, hidden) or None)
    -> (output (B, T, hidden), h_n (1, B, hidden)). ``nonlinearity``: "tanh" or "relu"."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        batch_first: bool = True,
        nonlinearity: str = "tanh",
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size, batch_first)
        self.nonlinearity = nonlinearity

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x, unbatched = self._batch_major(x)
        batch, length, _ = x.shape
        h = self._initial(h0, batch, unbatched, x, "h0")
        activation = ops.tanh if self.nonlinearity == "tanh" else ops.relu
        # x_t W_ih^T + b_ih for every step at once: (B, T, hidden)
        from_input = ops.linear(x, self.weight_ih_l0, self.bias_ih_l0)
        steps = []
        for t in range(length):
            # h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)
            h = activation(from_input[:, t] + ops.linear(h, self.weight_hh_l0, self.bias_hh_l0))
            steps.append(h)
        return self._output(steps, unbatched), self._final(h, unbatched)


class LSTM(_Recurrent):
    """Long short-term memory (Hochreiter and Schmidhuber 1997).

    forward(x: (B, T, input_size), (h0, c0) or None)
    -> (output (B, T, hidden), (h_n, c_n)), each state (1, B, hidden).
    """

    gates = 4

    def forward(self, x: Tensor, state: tuple | None = None) -> tuple[Tensor, tuple]:
        x, unbatched = self._batch_major(x)
        batch, length, _ = x.shape
        h0, c0 = state if state is not None else (None, None)
        h = self._initial(h0, batch, unbatched, x, "h0")
        c = self._initial(c0, batch, unbatched, x, "c0")
        from_input = ops.linear(x, self.weight_ih_l0, self.bias_ih_l0)  # (B, T, 4 hidden)
        steps = []
        for t in range(length):
            gates = from_input[:, t] + ops.linear(h, self.weight_hh_l0, self.bias_hh_l0)
            i, f, g, o = gates.chunk(4, dim=-1)
            i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
            c = f * c + i * g  # c_t = f * c_{t-1} + i * g
            h = o * c.tanh()  # h_t = o * tanh(c_t)
            steps.append(h)
        final = (self._final(h, unbatched), self._final(c, unbatched))
        return self._output(steps, unbatched), final
