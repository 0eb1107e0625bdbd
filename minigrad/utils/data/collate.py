"""``default_collate``: a list of examples -> one batch, as PyTorch makes it.

Tensors are stacked along a new first dimension; NumPy arrays and NumPy numbers become
tensors first (keeping their dtype); Python floats become a float64 tensor and ints an int64
one; strings stay a list. A tuple, list, dict or namedtuple of these is batched field by
field: ``[(x0, y0), (x1, y1)]`` -> ``[stack(x0, x1), stack(y0, y1)]`` (a list, for tuples
too, as in PyTorch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from minigrad.creation import as_tensor, tensor
from minigrad.ops import stack
from minigrad.tensor import Tensor


def _check_numpy(array) -> None:
    if array.dtype.kind in "SaUO":  # strings and Python objects make no tensor
        raise TypeError(
            f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
            f"lists; found an array of dtype {array.dtype}"
        )


def default_collate(batch):
    """Stack a list of examples into a batch (see the module's docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {example.shape for example in batch}
        if len(shapes) > 1:
            raise RuntimeError(
                f"default_collate: stack expects each tensor to be equal size, got shapes "
                f"{sorted(shapes)}"
            )
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        _check_numpy(elem)
        return default_collate([as_tensor(example) for example in batch])
    if isinstance(elem, np.generic):
        _check_numpy(np.asarray(elem))
        return as_tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=np.float64)
    if isinstance(elem, int):  # (bools too: a bool tensor)
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        fields = {key: default_collate([example[key] for example in batch]) for key in elem}
        try:
            return type(elem)(fields)
        except TypeError:  # a mapping that cannot be made from a dict
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(example) != len(elem) for example in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(
        f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(elem)}"
    )


def default_convert(data):
    """One example without batching (``batch_size=None``): NumPy arrays and numbers become
    tensors, inside tuples, lists and dicts too; everything else is left as it is."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SaUO":
        return as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "SaUO":
        return as_tensor(np.asarray(data))
    if isinstance(data, Mapping):
        fields = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(field) for field in data))
    if isinstance(data, tuple):
        return [default_convert(field) for field in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(field) for field in data])
        except TypeError:
            return [default_convert(field) for field in data]
    return data
