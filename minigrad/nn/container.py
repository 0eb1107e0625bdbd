"""Containers: ``Sequential`` (modules run one after another), ``ModuleList`` and
``ModuleDict`` (a list or dict whose modules are registered, named "0", "1", ... or by key),
``ParameterList`` and ``ParameterDict`` (the same for parameters)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping

from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class Sequential(Module):
    """``Sequential(a, b, c)(x) == c(b(a(x)))``; also accepts one OrderedDict of names."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(modules):
                self.add_module(str(index), module)

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def __getitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*modules[index])
        return modules[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleList(Module):
    """A list of modules whose parameters are registered (a plain list would hide them)."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._reset(modules)

    def _reset(self, modules) -> None:
        for name in list(self._modules):
            delattr(self, name)
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def __getitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(modules[index])
        return modules[index]

    def __setitem__(self, index: int, module: Module) -> None:
        index = range(len(self))[index]
        self.add_module(str(index), module)

    def __delitem__(self, index) -> None:
        modules = list(self._modules.values())
        del modules[index]
        self._reset(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): loop over its modules instead")


def _pairs(items) -> Iterable:
    """(key, value) pairs of a mapping, or the pairs themselves."""
    if isinstance(items, Mapping):
        return items.items()
    return items


class ModuleDict(Module):
    """A dict of modules whose parameters are registered, each under its key."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        for key, module in _pairs(modules):
            self[key] = module

    def pop(self, key: str) -> Module:
        module = self._modules[key]
        del self[key]
        return module

    def clear(self) -> None:
        for key in list(self._modules):
            del self[key]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): call its modules instead")


def _as_parameter(value) -> Parameter:
    """A Parameter as it is; a Tensor becomes a Parameter (as in PyTorch)."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value, requires_grad=value.requires_grad or value.grad_fn is None)
    raise TypeError(f"expected a Parameter or a Tensor, got {type(value).__name__}")


class ParameterList(Module):
    """A list of parameters, registered as "0", "1", ... (a plain list would hide them)."""

    def __init__(self, values: Iterable | None = None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __getitem__(self, index):
        params = list(self._parameters.values())
        if isinstance(index, slice):
            return ParameterList(params[index])
        return params[index]

    def __setitem__(self, index: int, value) -> None:
        index = range(len(self))[index]
        self.register_parameter(str(index), _as_parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, value) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values: Iterable) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward(): use its parameters instead")

    def extra_repr(self) -> str:
        return ", ".join(f"({i}): {tuple(p.shape)}" for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters, each registered under its key."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        self.register_parameter(key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def update(self, parameters) -> None:
        for key, value in _pairs(parameters):
            self[key] = value

    def pop(self, key: str) -> Parameter:
        value = self._parameters[key]
        del self[key]
        return value

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward(): use its parameters instead")
