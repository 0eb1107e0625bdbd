"""``Parameter``: a Tensor that a Module learns.

Assigning a Parameter to a Module attribute (``self.weight = Parameter(...)``) registers it,
so that ``module.parameters()`` finds it and an optimizer can update it.
"""

from __future__ import annotations

import numpy as np

from minigrad.tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor that requires grad (unless ``requires_grad=False``) and is registered by
    the Module it is assigned to. ``data`` is a Tensor or an array; it is wrapped, not copied.
    """

    __slots__ = ()  # the Tensor's slots are all it needs: no per-object __dict__

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            data = np.zeros(0, dtype=np.float32)
        super().__init__(data.detach() if isinstance(data, Tensor) else data, requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
