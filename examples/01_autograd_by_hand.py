"""01 - Autograd by hand: the chain rule, run forwards and backwards.

What to look at:

1. A scalar expression L = (a * b + c) * f. Backward walks the graph from L to the leaves and
   multiplies local derivatives along the way (the chain rule). The script prints the
   gradients minigrad found next to the ones worked out by hand: dL/da = f * b, ...
2. A neuron o = tanh(w1 x1 + w2 x2 + b): the derivative of tanh is 1 - tanh^2, so
   do/dw1 = (1 - o^2) x1. Same check.
3. Tensors: L = sum(tanh(X W + b)). Each entry of dL/dW sums over the batch, and broadcasting
   the bias over rows means its gradient is summed over rows: dL/db = sum_rows(1 - H^2).
   The hand formula is checked, and ``mg.gradcheck`` compares the whole backward with finite
   differences in float64 (float32 has too few digits for (f(x + eps) - f(x - eps)) / 2 eps).
4. Gradient descent by hand: fit y = 2x - 1 with a weight and a bias, the loop of PyTorch's
   tutorials: backward, then ``w -= lr * w.grad`` under ``mg.no_grad()`` (an update is not
   part of the model: no graph for it), then ``w.grad.zero_()`` (gradients add up otherwise).
5. The graphs themselves (``mg.viz.draw_graph``): every op node, and after the backward pass
   inside ``mg.viz.record_grads()`` every edge labelled with the gradient that went along it.
   Look at ``a`` and ``b`` in the scalar graph: the multiply node sends each one the *other*
   operand times the upstream gradient.

Run:  python examples/01_autograd_by_hand.py [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import minigrad as mg


def scalar_chain_rule() -> mg.Tensor:
    """L = (a * b + c) * f; returns L after backward, its gradients checked by hand."""
    a = mg.tensor(2.0, requires_grad=True)
    b = mg.tensor(-3.0, requires_grad=True)
    c = mg.tensor(10.0, requires_grad=True)
    f = mg.tensor(-2.0, requires_grad=True)
    for name, leaf in zip("abcf", (a, b, c, f)):
        leaf.name = name
    e = a * b  # e = -6
    d = e + c  # d = 4
    loss = d * f  # L = -8
    loss.name = "L"
    with mg.viz.record_grads():
        loss.backward()

    # by hand: dL/dd = f, dL/dc = dL/dd * 1, dL/de = dL/dd * 1, dL/da = dL/de * b, ...
    by_hand = {"a": f.item() * b.item(), "b": f.item() * a.item(), "c": f.item(), "f": d.item()}
    print("1) scalars: L = (a * b + c) * f with a=2, b=-3, c=10, f=-2")
    print(f"   L = {loss.item():g}")
    for name, leaf in zip("abcf", (a, b, c, f)):
        check = "ok" if leaf.grad.item() == by_hand[name] else "MISMATCH"
        print(f"   dL/d{name} = {leaf.grad.item():6g}   by hand {by_hand[name]:6g}   {check}")
    return loss


def neuron() -> None:
    """o = tanh(w1 x1 + w2 x2 + b): do/dw_i = (1 - o^2) x_i."""
    x1, x2 = mg.tensor(2.0), mg.tensor(0.0)
    w1 = mg.tensor(-3.0, requires_grad=True)
    w2 = mg.tensor(1.0, requires_grad=True)
    b = mg.tensor(6.8813735870195432, requires_grad=True)
    o = (w1 * x1 + w2 * x2 + b).tanh()
    o.backward()
    local = 1.0 - o.item() ** 2  # tanh'(n) = 1 - tanh(n)^2
    print("2) a neuron: o = tanh(w1 x1 + w2 x2 + b)")
    print(f"   o = {o.item():.4f}, tanh' = 1 - o^2 = {local:.4f}")
    print(f"   do/dw1 = {w1.grad.item():.4f}   by hand (1 - o^2) x1 = {local * x1.item():.4f}")
    print(f"   do/dw2 = {w2.grad.item():.4f}   by hand (1 - o^2) x2 = {local * x2.item():.4f}")
    print(f"   do/db  = {b.grad.item():.4f}   by hand (1 - o^2)      = {local:.4f}")


def tensor_layer() -> mg.Tensor:
    """L = sum(tanh(X W + b)) in float64; the hand gradients and gradcheck agree."""
    mg.manual_seed(0)
    x = mg.randn(4, 3, dtype=np.float64, requires_grad=True)
    w = mg.randn(3, 2, dtype=np.float64, requires_grad=True)
    bias = mg.randn(2, dtype=np.float64, requires_grad=True)
    x.name, w.name, bias.name = "X", "W", "b"

    def layer(x, w, bias):
        return (x @ w + bias).tanh().sum()

    loss = layer(x, w, bias)
    loss.name = "L"
    with mg.viz.record_grads():
        loss.backward()

    h = np.tanh(x.numpy() @ w.numpy() + bias.numpy())
    upstream = 1.0 - h**2  # dL/d(XW + b): tanh' times dL/dH = 1
    by_hand = {
        "X": upstream @ w.numpy().T,  # dL/dX = dL/dZ W^T
        "W": x.numpy().T @ upstream,  # dL/dW = X^T dL/dZ
        "b": upstream.sum(axis=0),  # broadcast over rows -> summed over rows
    }
    print("3) tensors: L = sum(tanh(X W + b)), X (4, 3), W (3, 2), b (2,), float64")
    for name, leaf in (("X", x), ("W", w), ("b", bias)):
        error = np.abs(leaf.grad.numpy() - by_hand[name]).max()
        print(f"   dL/d{name} shape {leaf.grad.shape}: max |autograd - by hand| = {error:.1e}")
    passed = mg.gradcheck(layer, (x, w, bias))
    print(f"   mg.gradcheck (finite differences, float64): {'passed' if passed else 'FAILED'}")
    return loss


def gradient_descent_by_hand(steps: int = 100, lr: float = 0.1) -> None:
    """Fit y = 2x - 1: each step, L = mean((w x + b - y)^2), then w -= lr dL/dw (b too)."""
    x = mg.linspace(-1.0, 1.0, 32)
    y = 2.0 * x - 1.0
    w = mg.tensor(0.0, requires_grad=True)
    b = mg.tensor(0.0, requires_grad=True)
    print("4) gradient descent by hand: fit y = 2x - 1 with w x + b, from w = b = 0")
    for step in range(steps + 1):
        loss = ((w * x + b - y) ** 2).mean()
        if step % 25 == 0:
            print(
                f"   step {step:3d}: L = {loss.item():.6f}, w = {w.item():.4f}, b = {b.item():.4f}"
            )
        if step == steps:
            break
        loss.backward()
        with mg.no_grad():  # the update itself is not recorded: w stays a leaf
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad.zero_()  # else the next backward adds its gradient to this one
        b.grad.zero_()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where the graphs go")
    parser.add_argument("--quick", action="store_true", help="(already quick; accepted)")
    args = parser.parse_args(argv)
    out = Path(args.out)

    scalar_loss = scalar_chain_rule()
    neuron()
    tensor_loss = tensor_layer()
    gradient_descent_by_hand()

    for loss, name in ((scalar_loss, "01_scalar_graph"), (tensor_loss, "01_tensor_graph")):
        path = mg.viz.render(mg.viz.draw_graph(loss), out / f"{name}.svg")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
