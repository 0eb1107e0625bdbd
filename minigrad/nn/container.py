"""Containers: ``Sequential`` (modules run one after another) and ``ModuleList`` (a list
whose modules are registered, named "0", "1", ...)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from minigrad.nn.module import Module


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
