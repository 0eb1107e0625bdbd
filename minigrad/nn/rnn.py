"""Recurrent networks, the models the Transformer replaced: ``RNN`` and ``LSTM`` (``GRU`` is in
gru.py, the single-step cells in cells.py). One step of each, with x_t the input and h the
previous hidden state:

    RNN:   h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)      (or relu)

    LSTM:  i, f, g, o = split(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)   (gates in that order)
           i = sigmoid(i), f = sigmoid(f), g = tanh(g), o = sigmoid(o)
           c_t = f * c_{t-1} + i * g        (the cell state: a gated shortcut through time)
           h_t = o * tanh(c_t)

The gradient from step t back to step t-k passes k times through W_hh and tanh in the RNN;
in the LSTM it can pass along c instead, multiplied only by the forget gates f.

Stacked layers (``num_layers``) feed each layer's hidden states to the next as its input
sequence; ``bidirectional=True`` runs a second copy of each layer from the last step to the
first and concatenates both directions' states. The signature, parameter names
(``weight_ih_l0``, ``bias_hh_l1_reverse``...), shapes, gate order, the (T, B, features) layout
(``batch_first=False``) and the initialisation U(-1/sqrt(hidden), 1/sqrt(hidden)) are
PyTorch's, so weights can be copied between the two.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import ops
from minigrad.backend import array_module
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor

# -- one step of each: ``from_input`` is x_t W_ih^T + b_ih, computed for all steps at once ----


def rnn_step(from_input: Tensor, h: Tensor, w_hh, b_hh, nonlinearity: str = "tanh") -> Tensor:
    """h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)."""
    pre_activation = from_input + ops.linear(h, w_hh, b_hh)
    return ops.tanh(pre_activation) if nonlinearity == "tanh" else ops.relu(pre_activation)


def lstm_step(from_input: Tensor, h: Tensor, c: Tensor, w_hh, b_hh) -> tuple[Tensor, Tensor]:
    """(h_t, c_t) from (h_{t-1}, c_{t-1}), the gates i, f, g, o in PyTorch's order."""
    gates = from_input + ops.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, dim=-1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c + i * g  # c_t = f * c_{t-1} + i * g
    h = o * c.tanh()  # h_t = o * tanh(c_t)
    return h, c


class _Recurrent(Module):
    """What RNN, LSTM and GRU share: the weights of every layer and direction, the input
    layout, the loops over layers, directions and time. A subclass sets ``gates`` (how many
    hidden-sized blocks its weights stack), ``state_names`` and ``step``."""

    gates = 1
    state_names = ("h0",)  # LSTM: ("h0", "c0")

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype=None,
    ):
        super().__init__()
        name = type(self).__name__
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(
                f"{name}: hidden_size and num_layers must be positive, got {hidden_size} "
                f"and {num_layers}"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout must be between 0 and 1, got {dropout}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        dtype = np.dtype(dtype or np.float32)
        rows = self.gates * hidden_size
        for layer in range(num_layers):
            # layer 0 reads the input; the next ones the states of both directions below
            layer_input = input_size if layer == 0 else hidden_size * self.num_directions
            for direction in range(self.num_directions):
                suffix = self._suffix(layer, direction)
                setattr(self, "weight_ih" + suffix, Parameter(np.empty((rows, layer_input), dtype)))
                setattr(self, "weight_hh" + suffix, Parameter(np.empty((rows, hidden_size), dtype)))
                if bias:
                    setattr(self, "bias_ih" + suffix, Parameter(np.empty(rows, dtype)))
                    setattr(self, "bias_hh" + suffix, Parameter(np.empty(rows, dtype)))
        self.reset_parameters()

    @staticmethod
    def _suffix(layer: int, direction: int) -> str:
        return f"_l{layer}" + ("_reverse" if direction else "")

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _weights(self, layer: int, direction: int) -> tuple:
        """(W_ih, W_hh, b_ih, b_hh) of one layer and direction; the biases None without bias."""
        suffix = self._suffix(layer, direction)
        return tuple(
            getattr(self, name + suffix, None)
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        )

    def step(self, from_input: Tensor, state: tuple, w_hh, b_hh) -> tuple:
        """The next state (a tuple: (h,) or (h, c)) from the previous one."""
        raise NotImplementedError

    def forward(self, input: Tensor, hx=None):  # noqa: A002  (PyTorch's name)
        """input: (T, B, input_size), (B, T, input_size) with batch_first, or (T, input_size);
        hx: the initial states, each (num_layers * num_directions, B, hidden_size), zeros if
        None. Returns (output (T, B, num_directions * hidden_size), the final states)."""
        x, states, unbatched = self._prepared(input, hx)
        finals = []
        for layer in range(self.num_layers):
            directions = []
            for direction in range(self.num_directions):
                index = layer * self.num_directions + direction
                sequence, final = self._run(x, states[index], layer, direction)
                directions.append(sequence)
                finals.append(final)
            # the layer's output (T, B, D * hidden): both directions side by side
            x = directions[0] if len(directions) == 1 else ops.cat(directions, dim=-1)
            if layer < self.num_layers - 1:  # dropout between layers, not after the last
                x = ops.dropout(x, self.dropout, self.training)
        output = x[:, 0] if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        # each final state stacked over layers and directions: (num_layers * D, B, hidden)
        stacked = tuple(ops.stack([final[i] for final in finals], dim=0) for i in range(
            len(self.state_names)))  # fmt: skip
        if unbatched:
            stacked = tuple(state[:, 0] for state in stacked)
        return output, (stacked[0] if len(stacked) == 1 else stacked)

    def _run(self, x: Tensor, state: tuple, layer: int, direction: int):
        """One layer in one direction over the whole sequence x (T, B, features): the hidden
        states (T, B, hidden) in the sequence's order, and the final state."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
        from_input = ops.linear(x, w_ih, b_ih)  # x_t W_ih^T + b_ih for every step at once
        length = x.shape[0]
        times = range(length) if direction == 0 else range(length - 1, -1, -1)
        hidden = [None] * length
        for t in times:
            state = self.step(from_input[t], state, w_hh, b_hh)
            hidden[t] = state[0]
        return ops.stack(hidden, dim=0), state

    def _prepared(self, input: Tensor, hx):  # noqa: A002
        """x as (T, B, input_size), the initial state of each layer and direction (a list of
        tuples), and whether the input came without a batch dim."""
        name = type(self).__name__
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"{name}: expected input (T, B, {self.input_size}) (or (B, T, "
                f"{self.input_size}) with batch_first=True, or (T, {self.input_size}) "
                f"unbatched), got {input.shape}"
            )
        unbatched = input.ndim == 2
        if unbatched:
            x = input.unsqueeze(1)
        else:
            x = input.transpose(0, 1) if self.batch_first else input
        batch = x.shape[1]
        layers = self.num_layers * self.num_directions
        if hx is None:
            zeros = array_module(x.array).zeros((layers, batch, self.hidden_size), x.dtype)
            given = [Tensor._make(zeros)] * len(self.state_names)
        else:
            given = list(hx) if isinstance(hx, (tuple, list)) else [hx]
            if len(given) != len(self.state_names):
                raise TypeError(
                    f"{name}: expected the initial state as "
                    f"{' and '.join(self.state_names)}, got {len(given)} tensors"
                )
            expected = (
                (layers, self.hidden_size) if unbatched else (layers, batch, self.hidden_size)
            )
            for state_name, state in zip(self.state_names, given):
                if state.shape != expected:
                    raise RuntimeError(
                        f"{name}: {state_name} must have shape {expected}, got {state.shape}"
                    )
            if unbatched:
                given = [state.unsqueeze(1) for state in given]
        states = [tuple(state[i] for state in given) for i in range(layers)]
        return x, states, unbatched

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(_Recurrent):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (``nonlinearity``
    "tanh" or "relu").

    forward(input (T, B, input_size), h0 (num_layers * D, B, hidden) or None)
    -> (output (T, B, D * hidden), h_n (num_layers * D, B, hidden)), D = 2 if bidirectional.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype=None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype
        )
        self.nonlinearity = nonlinearity

    def step(self, from_input: Tensor, state: tuple, w_hh, b_hh) -> tuple:
        return (rnn_step(from_input, state[0], w_hh, b_hh, self.nonlinearity),)

    def extra_repr(self) -> str:
        text = super().extra_repr()
        return text + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(_Recurrent):
    """Long short-term memory (Hochreiter and Schmidhuber 1997).

    forward(input (T, B, input_size), (h0, c0) or None)
    -> (output (T, B, D * hidden), (h_n, c_n)), each state (num_layers * D, B, hidden).
    """

    gates = 4
    state_names = ("h0", "c0")

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        dtype=None,
    ):
        if proj_size != 0:
            raise ValueError(f"LSTM: proj_size={proj_size} is not supported here (only 0)")
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype
        )
        self.proj_size = 0

    def step(self, from_input: Tensor, state: tuple, w_hh, b_hh) -> tuple:
        h, c = state
        return lstm_step(from_input, h, c, w_hh, b_hh)
