"""Version counters: how many times minigrad has written into an array's memory in place.

Backward reads the arrays that forward saved. If one was changed in place in between
(``y = x.exp(); y.add_(1)`` under ``no_grad``, or ``y.data[...] = 0``), the gradient would be
silently wrong. So, as in PyTorch, every in-place write that goes through minigrad
(``add_``, ``t[i] = v``, ``zero_``, an optimizer's step...) bumps the version of the memory it
wrote, an op notes the versions of what it saves, and backward refuses to use an array whose
version moved on.

The count belongs to the memory, not to a Tensor: ``t.data``, ``t.detach()`` and NumPy views
of one array share it. Writes straight into ``t.array`` are not seen.
"""

from __future__ import annotations

import weakref

_counts: dict[int, int] = {}  # id(memory owner) -> writes so far; empty until the first write
_writes = 0  # every write so far, all memory together


def _owner(array):
    """The object that owns an array's memory: a view's base, or the array itself."""
    base = getattr(array, "base", None)
    return array if base is None else base


def bump(*arrays) -> None:
    """Note one in-place write into each of ``arrays``."""
    global _writes
    _writes += 1
    for array in arrays:
        owner = _owner(array)
        key = id(owner)
        if key not in _counts:
            _counts[key] = 0
            try:  # forget the count with the memory (its id may be reused afterwards)
                weakref.finalize(owner, _counts.pop, key, None)
            except TypeError:  # an owner that cannot be weakly referenced: keep the count
                pass
        _counts[key] += 1


def read(values: tuple) -> tuple:
    """(writes so far, the version of each of ``values``: None for what is not an array);
    the versions are None while nothing has been written in place at all."""
    if not _counts:
        return _writes, None
    return _writes, tuple(
        [_counts.get(id(_owner(v)), 0) if hasattr(v, "shape") else None for v in values]
    )


def changed(values: tuple, saved: tuple | None) -> tuple | None:
    """(position, version then, version now) of the first of ``values`` written in place
    since ``saved = read(values)``; None if none was."""
    writes_then, versions_then = saved or (_writes, None)
    if writes_then == _writes:  # nothing at all written since (the common case)
        return None
    now = read(values)[1]
    if now is None:
        return None
    versions_then = versions_then or (0,) * len(values)
    for i, (then, current) in enumerate(zip(versions_then, now)):
        if current is not None and current != (then or 0):
            return i, then or 0, current
    return None
