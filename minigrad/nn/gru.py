"""``GRU``, the gated recurrent unit (Cho et al. 2014): an LSTM with one state and two gates.
One step, in PyTorch's gate order r, z, n:

    r = sigmoid(x_t W_ir^T + b_ir + h_{t-1} W_hr^T + b_hr)        reset gate
    z = sigmoid(x_t W_iz^T + b_iz + h_{t-1} W_hz^T + b_hz)        update gate
    n = tanh(x_t W_in^T + b_in + r * (h_{t-1} W_hn^T + b_hn))     candidate state
    h_t = (1 - z) * n + z * h_{t-1}

The last line is a gated shortcut through time, as the LSTM's cell state: where z is near 1,
h_{t-1} passes on unchanged and so does its gradient. W_ih stacks W_ir, W_iz, W_in
(3 * hidden rows), W_hh stacks W_hr, W_hz, W_hn; names and shapes are PyTorch's.
"""

from __future__ import annotations

from minigrad import ops
from minigrad.nn.rnn import _Recurrent
from minigrad.tensor import Tensor


def gru_step(from_input: Tensor, h: Tensor, w_hh, b_hh) -> Tensor:
    """h_t from h_{t-1}; ``from_input`` is x_t W_ih^T + b_ih (the three blocks r, z, n)."""
    input_r, input_z, input_n = from_input.chunk(3, dim=-1)
    hidden_r, hidden_z, hidden_n = ops.linear(h, w_hh, b_hh).chunk(3, dim=-1)
    r = ops.sigmoid(input_r + hidden_r)
    z = ops.sigmoid(input_z + hidden_z)
    n = ops.tanh(input_n + r * hidden_n)  # r scales the hidden part only, bias b_hn included
    return (1.0 - z) * n + z * h


class GRU(_Recurrent):
    """Gated recurrent unit, with PyTorch's signature and layout (see the module docstring).

    forward(input (T, B, input_size), h0 (num_layers * D, B, hidden) or None)
    -> (output (T, B, D * hidden), h_n (num_layers * D, B, hidden)), D = 2 if bidirectional.
    """

    gates = 3

    def step(self, from_input: Tensor, state: tuple, w_hh, b_hh) -> tuple:
        return (gru_step(from_input, state[0], w_hh, b_hh),)
