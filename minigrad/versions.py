"""Version counters: how many times minigrad has written into an array's memory in place.

Backward reads the arrays that forward saved. If one was changed in place in between
(``y = x.exp(); y.add_(1)`` under ``no_grad``, or ``y.data[...] = 0``), the gradient would be
silently wrong. So, as in PyTorch, every in-place write that goes through minigrad
(``add_``, ``t[i] = v``, ``zero_``, an optimizer's step...) bumps the version of the memory it
wrote, and backward refuses to use an array written after the op saved it.

Every write gets a serial number, and each memory remembers the number of its latest write.
An op notes only the number of the latest write when it saves (``read``): one integer,
whatever it saves. An array was written since if its memory's latest write is newer
(``changed``); while nothing at all was written since, that is one comparison.

The count belongs to the memory, not to a Tensor: ``t.data``, ``t.detach()`` and NumPy views
of one array share it. Writes straight into ``t.array`` are not seen.
"""

from __future__ import annotations

import weakref

# id(memory owner) -> (its version: the writes into it so far, the serial number of the latest)
_memory: dict[int, tuple[int, int]] = {}
_writes = 0  # every write so far, all memory together: the serial number of the latest


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
        if key not in _memory:
            _memory[key] = (0, 0)
            try:  # forget the count with the memory (its id may be reused afterwards)
                weakref.finalize(owner, _memory.pop, key, None)
            except TypeError:  # an owner that cannot be weakly referenced: keep the count
                pass
        _memory[key] = (_memory[key][0] + 1, _writes)


def read() -> int:
    """What an op notes when it saves arrays: the serial number of the latest write so far
    (any later write into one of them has a higher one)."""
    return _writes


def changed(values: tuple, then: int | None) -> tuple | None:
    """(position, version now) of the first of ``values`` written in place since
    ``then = read()``, noted when they were saved; None if none was."""
    if then is None or then == _writes:  # nothing at all written since (the common case)
        return None
    for position, value in enumerate(values):
        if hasattr(value, "shape"):
            version, latest = _memory.get(id(_owner(value)), (0, 0))
            if latest > then:
                return position, version
    return None
