"""``Module``: the base class of every layer and model.

A Module holds three kinds of things, registered simply by assigning them as attributes:

    self.weight = Parameter(...)      # learned: parameters(), state_dict(), optimizers
    self.attn = MultiHeadAttention()  # a submodule: its parameters get the prefix "attn."
    self.register_buffer("pe", t)     # state that is not learned (saved unless persistent=False)

Calling a module (``block(x)``) runs its ``forward``. On the way it notes which graph nodes
the call created, for ``minigrad.viz`` to draw each module as a box: see ``Module.__call__``.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from minigrad import backend
from minigrad.autograd.function import next_sequence_number
from minigrad.autograd.grad_mode import modes
from minigrad.hooks import RemovableHandle
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class ModuleCall(NamedTuple):
    """One call of a module, as recorded on the graph node of each of its outputs.

    Every graph node whose ``ctx.seq`` lies in ``[start, end)`` was created during the call.
    ``module`` is a weak reference (the graph must not keep a model alive).
    """

    module: weakref.ref
    start: int
    end: int


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` did not match (as PyTorch returns it)."""

    missing_keys: list
    unexpected_keys: list


class Module:
    """Base class of layers and models: subclass it, build the parts in ``__init__`` (after
    ``super().__init__()``) and write ``forward``."""

    training: bool

    def __init__(self):
        # object.__setattr__: our own __setattr__ needs these dicts to exist already
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward() method")

    # -- registration by attribute assignment ------------------------------------------------
    # Registered objects live in the registry dicts (which fix their order) and also in the
    # instance __dict__, so that reading ``self.weight`` is an ordinary, fast attribute lookup.

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() is called; "
                f"call super().__init__() first in {type(self).__name__}.__init__"
            )
        registries = (self._parameters, self._modules, self._buffers)
        if isinstance(value, Parameter):
            target = self._parameters
        elif isinstance(value, Module):
            target = self._modules
        elif name in self._buffers and (value is None or isinstance(value, Tensor)):
            target = self._buffers
        elif name in self._parameters and value is None:
            target = self._parameters
        elif name in self._parameters:
            raise TypeError(
                f"cannot assign {type(value).__name__} as parameter {name!r} of "
                f"{type(self).__name__} (a Parameter or None is expected)"
            )
        else:
            target = None
        for registry in registries:
            if registry is not target:
                registry.pop(name, None)
        if target is not None:
            target[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._modules, self._buffers):
            registry.pop(name, None)
        self._non_persistent.discard(name)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None")
        self._parameters[name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Keep ``tensor`` as state that is not learned: it moves with ``to(device)`` and,
        if ``persistent``, is saved in ``state_dict()``."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name: str, module: Module | None) -> None:
        self._modules[name] = module
        object.__setattr__(self, name, module)

    register_module = add_module

    # -- walking the tree ------------------------------------------------------------------

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(dotted name, module) for this module ("") and every module below it."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            child_prefix = f"{prefix}.{name}" if prefix else name
            yield from module.named_modules(memo, child_prefix, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """(dotted name, parameter) pairs, e.g. ("blocks.0.attn.q_proj.weight", p); a
        parameter shared by two modules is listed once."""
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def get_submodule(self, target: str) -> Module:
        module = self
        for part in target.split(".") if target else []:
            if part not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r}")
            module = module._modules[part]
        return module

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- state ------------------------------------------------------------------------------

    def state_dict(self, *, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name, as detached Tensors that share
        memory with the module (copy them if the module will train on); ``keep_vars=True``
        gives the Parameters themselves."""
        live = self._state_targets(prefix)
        if keep_vars:
            return live
        return OrderedDict((name, tensor.detach()) for name, tensor in live.items())

    def _state_targets(self, prefix: str = "") -> OrderedDict:
        """name -> the live Tensor: what ``state_dict`` shows and ``load_state_dict`` fills."""
        targets = OrderedDict()
        for module_prefix, module in self.named_modules(prefix=prefix, remove_duplicate=False):
            dot = f"{module_prefix}." if module_prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    targets[dot + name] = param
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent:
                    targets[dot + name] = buffer
        return targets

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values (Tensors or arrays) into the parameters and buffers, in place.

        A key whose shape differs is always an error. With ``strict=True`` (the default) a
        missing or unexpected key is too; the error lists every such key at once.
        Returns ``(missing_keys, unexpected_keys)``.
        """
        targets = self._state_targets()
        missing = [key for key in targets if key not in state_dict]
        unexpected = [key for key in state_dict if key not in targets]
        mismatched = []
        for key, target in targets.items():
            if key in state_dict:
                shape = tuple(np.shape(_raw(state_dict[key])))
                if shape != target.shape:
                    mismatched.append(f"{key}: checkpoint {shape}, model {target.shape}")
        problems = []
        if mismatched:
            problems.append("size mismatch for " + "; ".join(mismatched))
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if problems:
            raise RuntimeError(
                f"error(s) in loading state_dict for {type(self).__name__}:\n  "
                + "\n  ".join(problems)
            )
        for key, target in targets.items():
            if key in state_dict:
                value = backend.to_device(_raw(state_dict[key]), target.device)
                target.array[...] = value
        return IncompatibleKeys(missing, unexpected)

    # -- modes, devices, gradients -----------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active) for this module and all below it."""
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if param.grad is None:
                continue
            # zeros in a new array: the engine may have handed two leaves one gradient array
            param.grad = None if set_to_none else param.zeros_like_detached()

    def to(self, *args, **kwargs) -> Module:
        """Move every parameter and buffer to a device (``"cpu"``/``"cuda"``) and/or cast the
        floating ones to a dtype, in place: the Parameter objects stay the same, so an
        optimizer made earlier still holds them."""
        device, dtype = backend.device_and_dtype(args, kwargs)

        def convert(array):
            if dtype is not None and array.dtype.kind == "f":
                array = array.astype(dtype, copy=False)
            return backend.to_device(array, device) if device is not None else array

        for tensor in list(self.parameters()) + list(self.buffers()):
            tensor.array = convert(tensor.array)
            if tensor.grad is not None:
                tensor.grad.array = convert(tensor.grad.array)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self) -> Module:
        return self.to("cuda")

    def float(self) -> Module:
        return self.to(np.float32)

    def double(self) -> Module:
        return self.to(np.float64)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn(module)`` on every submodule (children first) and on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- calling -------------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, args)`` runs before forward; returning a tuple replaces the args."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, args, output)`` runs after forward; a non-None result replaces
        the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def __call__(self, *args, **kwargs):
        """Run ``forward``, with the forward hooks around it.

        While grad mode is on it also leaves a trace for ``minigrad.viz``: the graph node
        (``grad_fn``) of each output Tensor made by this call gets a
        ``ModuleCall(module, start, end)`` appended to its ``module_calls`` list, where every
        node numbered ``start <= ctx.seq < end`` was created inside this call. Two counter
        reads and one append per output: cheap enough for every call.
        """
        if self._forward_pre_hooks:
            for hook in list(self._forward_pre_hooks.values()):
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        start = next_sequence_number()
        output = self.forward(*args, **kwargs)
        end = next_sequence_number()
        if self._forward_hooks:
            for hook in list(self._forward_hooks.values()):
                result = hook(self, args, output)
                if result is not None:
                    output = result
        if modes.grad_enabled and end > start:
            _record_call(self, output, start, end)
        return output

    # -- printing ------------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The settings shown between the parentheses of ``repr`` (override in layers)."""
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, module in self._modules.items():
            body = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr()
        count = _format_count(self.num_parameters())
        if not lines:
            return f"{type(self).__name__}({extra})" + (f"  # {count}" if count else "")
        if extra:
            lines.insert(0, extra)
        header = f"{type(self).__name__}(" + (f"  # {count}" if count else "")
        return header + "\n  " + "\n  ".join(lines) + "\n)"


def _record_call(module: Module, output, start: int, end: int) -> None:
    """Append a ModuleCall to the graph node of each output Tensor this call created."""
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    for item in outputs:
        if isinstance(item, (tuple, list)):  # LSTM: (output, (h_n, c_n))
            _record_call(module, item, start, end)
            continue
        node = item.grad_fn if isinstance(item, Tensor) else None
        # an output handed through unchanged (Dropout in eval) was made by someone else
        if node is None or not start <= node.seq < end:
            continue
        calls = node.__dict__.get("module_calls")
        if calls is None:
            calls = node.module_calls = []
        calls.append(ModuleCall(weakref.ref(module), start, end))


def _raw(value):
    """The array inside a Tensor, or the value itself (an array or a list)."""
    return value.array if isinstance(value, Tensor) else value


def _format_count(count: int) -> str:
    if count == 0:
        return ""
    return f"{count:,} parameter" + ("s" if count != 1 else "")
