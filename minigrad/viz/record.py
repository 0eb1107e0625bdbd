"""``record_grads``: keep, per graph edge, the norm of the gradient that flowed along it.

A tensor read by two ops (the skip and the branch of a residual block read the same ``x``)
receives two gradients, one along each edge, and ``x.grad`` (or a hook) sees only their sum.
The drawing wants each one, so inside ``record_grads()`` the backward pass notes

    head.edge_grad_norms[position] = || dL/d(input ``position`` of ``head``) ||_2

for every edge it sends a gradient along (None where it sends none). Off by default: one
norm per edge costs a pass over every gradient.

    with mg.viz.record_grads():
        loss.backward()
    mg.viz.draw_graph(loss)      # every edge labelled with its gradient norm
"""

from __future__ import annotations

from minigrad.autograd.grad_mode import SetFlag


def note_edge_norms(node, input_grads) -> None:
    """The engine's observer of each node's backward (``modes.node_observer``)."""
    node.edge_grad_norms = [
        grad.norm_value() if needed and grad is not None else None
        for needed, grad in zip(node.needs_input_grad, input_grads)
    ]


class record_grads(SetFlag):
    """Context manager (or decorator): backward records each edge's gradient norm."""

    flag, value = "node_observer", staticmethod(note_edge_norms)
