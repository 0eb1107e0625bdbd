"""03 - Add & Norm: Z = LayerNorm(X + O), forwards and backwards, with and without the residual.

What to look at:

1. Forward. Y = X + O adds the attention output O to its own input X (the residual), then
   LayerNorm(y) = gamma * (y - mu) / sqrt(sigma^2 + eps) + beta makes every token's vector
   mean 0 and variance 1 (gamma = 1, beta = 0 at init). The script prints mu and sigma^2 of
   each token before and after.
2. Backward through LayerNorm, by hand: with g = dL/dZ * gamma and y_hat the normalised Y,
       dL/dY = (g - mean(g) - y_hat * mean(g * y_hat)) / sqrt(sigma^2 + eps)
   and the script checks autograd against it.
3. Backward through the addition. d(X + O(X))/dX = I + dO/dX, so the gradient reaching X is
       dL/dX = dL/dY  (the identity term: the shortcut)  +  dL/dY * dO/dX  (the branch).
   The printout splits dL/dX into those two terms. The identity term is dL/dY itself,
   untouched by attention's weights; without the residual only the branch term is left,
   and it must pass through W_V, the softmax and W_O to reach X.
4. The graph (``mg.viz.draw_graph`` after ``record_grads``): the shortcut edge is drawn thick
   and labelled "shortcut", and each edge carries the norm of the gradient that went along
   it; the two edges into X (shortcut and branch) carry the two terms above. Compare the
   graph drawn with ``residual=False``: no shortcut, one way back.

Run:  python examples/03_add_and_norm.py [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad import nn

T, D_MODEL, N_HEADS = 4, 8, 2


class AddNorm(nn.Module):
    """Z = LayerNorm(X + O) with O = MultiHeadAttention(X); ``residual=False``: LayerNorm(O)."""

    def __init__(self, residual: bool = True):
        super().__init__()
        self.residual = residual
        self.attn = nn.MultiHeadAttention(D_MODEL, N_HEADS)
        self.ln = nn.LayerNorm(D_MODEL)

    def forward(self, x: mg.Tensor) -> mg.Tensor:
        attended = self.attn(x)
        self.summed = x + attended if self.residual else attended  # Y, kept to inspect
        self.summed.retain_grad()
        return self.ln(self.summed)


def layer_norm_backward_by_hand(y: np.ndarray, grad_z: np.ndarray, gamma: np.ndarray, eps=1e-5):
    """dL/dY = (g - mean(g) - y_hat * mean(g * y_hat)) / sqrt(sigma^2 + eps), g = dL/dZ gamma."""
    mu = y.mean(axis=-1, keepdims=True)
    std = np.sqrt(y.var(axis=-1, keepdims=True) + eps)
    y_hat = (y - mu) / std
    g = grad_z * gamma
    return (g - g.mean(-1, keepdims=True) - y_hat * (g * y_hat).mean(-1, keepdims=True)) / std


def run(residual: bool, out: Path) -> dict[str, float]:
    """Forward and backward one Add & Norm; print what happens; draw its graph."""
    label = "with the residual, Z = LayerNorm(X + O)" if residual else "without, Z = LayerNorm(O)"
    print(f"=== {label}")
    mg.manual_seed(0)  # the same weights and input for both runs
    block = AddNorm(residual).double()
    x = mg.randn(1, T, D_MODEL, dtype=np.float64, requires_grad=True)
    readout = mg.randn(1, T, D_MODEL, dtype=np.float64)  # L = sum(Z * R): a fixed readout
    x.name, readout.name = "X", "R"

    z = block(x)
    loss = (z * readout).sum()
    loss.name = "L"
    y = block.summed
    print(f"Y mean per token     {y.numpy()[0].mean(-1).round(3)}")
    print(f"Y variance per token {y.numpy()[0].var(-1).round(3)}")
    print(f"Z mean per token     {z.numpy()[0].mean(-1).round(6) + 0.0}")
    print(f"Z variance per token {z.numpy()[0].var(-1).round(3)}")

    with mg.viz.record_grads():
        loss.backward()

    by_hand = layer_norm_backward_by_hand(y.numpy(), readout.numpy(), block.ln.weight.numpy())
    print(f"LayerNorm backward: max |autograd dL/dY - by hand| = "
          f"{np.abs(y.grad.numpy() - by_hand).max():.1e}")  # fmt: skip

    total = x.grad.numpy()
    identity = y.grad.numpy() if residual else np.zeros_like(total)  # dL/dY, unchanged
    branch = total - identity  # dL/dY * dO/dX
    norms = {
        "identity": float(np.linalg.norm(identity)),
        "branch": float(np.linalg.norm(branch)),
        "total": float(np.linalg.norm(total)),
    }
    print(f"|dL/dX|                          = {norms['total']:.4f}")
    print(f"  identity term |dL/dY|          = {norms['identity']:.4f}")
    print(f"  branch term |dL/dY * dO/dX|    = {norms['branch']:.4f}")

    shortcuts = mg.viz.find_shortcuts(loss)
    print(f"shortcuts found in the graph: {len(shortcuts)}")
    for shortcut in shortcuts:
        carried = shortcut.node.edge_grad_norms[shortcut.skip_position]
        print(f"  shortcut edge carried |dL/dY| = {carried:.4f} (skips {shortcut.skip.name})")

    graph = mg.viz.draw_graph(loss, params=block)
    name = "03_add_norm_graph" if residual else "03_no_residual_graph"
    print(f"wrote {mg.viz.render(graph, out / f'{name}.svg')}")
    return norms


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where the graphs go")
    parser.add_argument("--quick", action="store_true", help="(already quick; accepted)")
    args = parser.parse_args(argv)
    np.set_printoptions(precision=4, suppress=True)
    out = Path(args.out)

    with_residual = run(residual=True, out=out)
    without = run(residual=False, out=out)
    share = with_residual["identity"] / with_residual["total"]
    print("=== summary")
    print(f"|dL/dX| with the residual {with_residual['total']:.4f}, "
          f"without {without['total']:.4f}")  # fmt: skip
    print(f"with the residual the identity term alone has norm {with_residual['identity']:.4f} "
          f"({share:.0%} of |dL/dX|): it reaches X whatever attention's weights are")  # fmt: skip


if __name__ == "__main__":
    main()
