"""The handle that ``register_hook`` (on a Tensor) and ``register_forward_hook`` (on a
Module) return, so that the hook can be removed."""

from __future__ import annotations


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends; ``handle.remove()`` unregisters."""

    _next_id = 0

    def __init__(self, hooks: dict):
        RemovableHandle._next_id += 1
        self.id = RemovableHandle._next_id
        self._hooks = hooks

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()
        return False
