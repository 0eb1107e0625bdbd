"""``record_grads``: keep, per graph edge, the norm of the gradient that flowed along it.

A tensor read by two ops (the skip and the branch of a residual block read the same ``x``)
receives two gradients, one along each edge, and ``x.grad`` (or a hook) sees only their sum.
The drawing wants each one, so inside ``record_grads()`` the backward pass notes

    head.edge_grad_norms[position] = || dL/d(input ``position`` of ``head``) ||_2

for every edge it sends a gradient along (None where it sends none). It also notes, for the
explorer page (``viz.explore``), when each node ran its backward (``head.backward_step``,
increasing) and a small picture of each edge's gradient (``head.edge_grad_thumbnails``, see
``thumbnail``). Off by default: one norm per edge costs a pass over every gradient.

    with mg.viz.record_grads():
        loss.backward()
    mg.viz.draw_graph(loss)      # every edge labelled with its gradient norm
"""

from __future__ import annotations

import itertools

import numpy as np

from minigrad.autograd.grad_mode import SetFlag
from minigrad.backend import to_numpy

THUMBNAIL_SIZE = (48, 48)  # at most (rows, columns)
_backward_steps = itertools.count()  # orders the nodes' backward calls, pass after pass


def note_edge_norms(node, input_grads) -> None:
    """The engine's observer of each node's backward (``modes.node_observer``)."""
    sent = [needed and grad is not None for needed, grad in zip(node.needs_input_grad, input_grads)]
    node.edge_grad_norms = [grad.norm_value() if s else None for s, grad in zip(sent, input_grads)]
    node.edge_grad_thumbnails = [
        thumbnail(grad.array) if s else None for s, grad in zip(sent, input_grads)
    ]
    node.backward_step = next(_backward_steps)


def thumbnail(array, size: tuple = THUMBNAIL_SIZE) -> np.ndarray:
    """A small float64 picture of an array: its first matrix (index 0 along every leading
    dimension; a vector is one row), averaged over blocks of rows and columns down to at most
    ``size``. It is linear in the array, so the thumbnail of a tensor's whole gradient is the
    sum of the thumbnails of the gradients that reached it along each edge."""
    while array.ndim > 2:
        array = array[0]
    matrix = to_numpy(array).astype(np.float64).reshape((1,) * (2 - array.ndim) + array.shape)
    for axis, limit in enumerate(size):
        length = matrix.shape[axis]
        if length > limit:
            starts = np.arange(limit) * length // limit
            counts = np.diff(np.append(starts, length)).reshape((-1, 1) if axis == 0 else (1, -1))
            matrix = np.add.reduceat(matrix, starts, axis=axis) / counts
    return matrix


class record_grads(SetFlag):
    """Context manager (or decorator): backward records each edge's gradient norm."""

    flag, value = "node_observer", staticmethod(note_edge_norms)
