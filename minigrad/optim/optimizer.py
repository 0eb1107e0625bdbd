"""``Optimizer``: the base of SGD, Adam and AdamW.

An optimizer holds ``param_groups`` (lists of parameters, each group with its own settings
such as ``lr``) and a ``state`` per parameter (momentum buffers, Adam's moments). ``step()``
updates every parameter that has a gradient, in place, under ``no_grad``; subclasses write
the update rule of one parameter in ``update`` (and may update many at once in
``update_group``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from minigrad import backend, versions
from minigrad.autograd.grad_mode import enable_grad, no_grad
from minigrad.tensor import Tensor


class Optimizer:
    def __init__(self, params: Iterable, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}  # parameter (hashed by identity) -> its state dict
        self.param_groups: list[dict] = []
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        """Add ``{"params": [...], "lr": ...}``; settings it leaves out come from defaults."""
        group = dict(group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for index, param in enumerate(group["params"]):
            if not isinstance(param, Tensor):
                raise TypeError(
                    f"{type(self).__name__}: parameter {index} is a {type(param).__name__}, "
                    "expected a Tensor"
                )
            if not param.requires_grad or not param.is_leaf:
                raise ValueError(
                    f"{type(self).__name__}: parameter {index} of shape {param.shape} must be "
                    "a leaf tensor that requires grad"
                )
            if id(param) in seen:
                raise ValueError(
                    f"{type(self).__name__}: parameter {index} of shape {param.shape} appears "
                    "in more than one place"
                )
            seen.add(id(param))
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (to None, or to zeros in place)."""
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if set_to_none:
                    param.grad = None
                else:
                    param.grad = Tensor._make(
                        backend.array_module(param.array).zeros_like(param.array)
                    )

    def step(self, closure=None):
        """Update every parameter that has a gradient. ``closure`` (optional) re-evaluates
        the model and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [param for param in group["params"] if param.grad is not None]
                if params:
                    self.update_group(params, group)
                    versions.bump(*[param.array for param in params])  # (legal between steps)
        return loss

    def update_group(self, params: list, group: dict) -> None:
        """Update ``params``, the parameters of ``group`` that have a gradient: one by one
        with ``update``, unless a subclass knows a faster way for many at once."""
        for param in params:
            self.update(param, param.grad.array, self.state.setdefault(param, {}), group)

    def update(self, param: Tensor, grad, state: dict, group: dict) -> None:
        """Update ``param.array`` in place from ``grad`` (an array); subclasses define it."""
        raise NotImplementedError

    # -- saving and restoring ------------------------------------------------------------------

    def state_dict(self) -> dict:
        """``{"state": {index: {name: array or number}}, "param_groups": [...]}`` with
        parameters replaced by their index in order, as in PyTorch. Arrays are NumPy copies,
        so the result can be saved (see ``mg.save``) and outlives further steps."""
        index_of = {}
        groups = []
        for group in self.param_groups:
            saved = {key: value for key, value in group.items() if key != "params"}
            saved["params"] = []
            for param in group["params"]:
                index_of[id(param)] = len(index_of)
                saved["params"].append(index_of[id(param)])
            groups.append(saved)
        state = {}
        for param, values in self.state.items():
            state[index_of[id(param)]] = {
                name: backend.to_numpy(value).copy() if hasattr(value, "shape") else value
                for name, value in values.items()
            }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore settings and per-parameter state saved by ``state_dict()``."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: {len(groups)} parameter groups saved, "
                f"the optimizer has {len(self.param_groups)}"
            )
        params = []
        for saved, group in zip(groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"{type(self).__name__}.load_state_dict: a saved group has "
                    f"{len(saved['params'])} parameters, the optimizer's has "
                    f"{len(group['params'])}"
                )
            params.extend(group["params"])
        by_index = dict(state_dict["state"])
        self.state = {}
        for index, values in by_index.items():
            param = params[int(index)]
            self.state[param] = {
                name: _restore(value, param, name, type(self).__name__)
                for name, value in values.items()
            }
        for saved, group in zip(groups, self.param_groups):
            for key, value in saved.items():
                if key != "params":
                    group[key] = tuple(value) if isinstance(value, list) else value

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for index, group in enumerate(self.param_groups):
            settings = ", ".join(f"{k}={v}" for k, v in group.items() if k != "params")
            lines.append(f"  group {index}: {len(group['params'])} parameters, {settings}")
        return "\n".join(lines + [")"])


def _restore(value, param: Tensor, name: str, owner: str):
    """A saved state value back as an array on the parameter's device (numbers stay)."""
    if isinstance(value, Tensor):
        value = value.array
    if not hasattr(value, "shape"):
        return value
    if value.ndim == 0 and name == "step":
        return int(value)
    if tuple(value.shape) != param.shape:
        raise ValueError(
            f"{owner}.load_state_dict: state {name!r} has shape {tuple(value.shape)}, "
            f"its parameter {param.shape}"
        )
    array = np.asarray(backend.to_numpy(value), dtype=param.dtype)
    return backend.to_device(array.copy(), param.device)
