"""``as_torch()``: inside it, ``import torch`` gives minigrad.

    with as_torch():
        import torch                      # minigrad, under torch's names
        import torch.nn.functional as F   # minigrad.nn.functional
        torch.randn(2, 3)

``torch``, ``torch.nn``, ``torch.nn.functional``, ``torch.nn.init``, ``torch.nn.utils``,
``torch.optim``, ``torch.optim.lr_scheduler``, ``torch.utils``, ``torch.utils.data``,
``torch.autograd`` and ``torch.cuda`` stand for the minigrad module of the same place. A name
minigrad does not have raises ``MissingTorchName`` (an AttributeError, so ``hasattr`` and
``getattr(torch, name, default)`` still work), and ``import torch.xyz`` of any other submodule
raises ``MissingTorchModule`` (a ModuleNotFoundError); ``missing_name(error)`` reads the torch
name out of either, or out of an AttributeError of a minigrad object (``x.flip`` on a Tensor:
``torch.Tensor.flip``). On exit ``sys.modules`` is as it was, a real ``torch`` included.

Besides minigrad's own names the stand-in has ``torch.device`` (a device name: minigrad's
tensors carry "cpu" or "cuda") and ``torch.load`` taking ``map_location=`` and
``weights_only=``; ``torch.save`` / ``torch.load`` are ``mg.save`` / ``mg.load``: safetensors
files of state dicts.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import re
import sys
import types
from contextlib import contextmanager

import minigrad as mg
from minigrad import backend

MODULES = {
    "torch": "minigrad",
    "torch.nn": "minigrad.nn",
    "torch.nn.functional": "minigrad.nn.functional",
    "torch.nn.init": "minigrad.nn.init",
    "torch.nn.utils": "minigrad.nn.utils",
    "torch.optim": "minigrad.optim",
    "torch.optim.lr_scheduler": "minigrad.optim.lr_scheduler",
    "torch.utils": "minigrad.utils",
    "torch.utils.data": "minigrad.utils.data",
    "torch.autograd": "minigrad.autograd",
    "torch.cuda": "minigrad.cuda",
}
# where minigrad's classes are public, searched in this order to name a class as torch does
PUBLIC = [
    "minigrad.nn",
    "minigrad.optim",
    "minigrad.optim.lr_scheduler",
    "minigrad.utils.data",
    "minigrad",
]


class device(str):  # noqa: N801  (torch.device)
    """torch.device("cuda") or torch.device("cuda", 0): here the device's name, which is what
    minigrad's tensors carry and its functions take; ``.type`` and ``.index`` as in torch."""

    def __new__(cls, type: str, index: int | None = None):  # noqa: A002
        name = str(type)
        kind, _, number = name.partition(":")
        backend.check_device(kind)
        made = super().__new__(cls, kind)
        made.type = kind
        made.index = int(number) if number else index
        return made


def load(f, map_location=None, weights_only=None, **_pickle_options):
    """``mg.load``: a safetensors file; ``map_location`` names the device."""
    target = map_location if isinstance(map_location, str) else "cpu"
    return mg.load(f, device=str(target).split(":")[0])


OVERRIDES = {"torch": {"device": device, "load": load}}


class MissingTorchName(AttributeError):
    """A name of torch that minigrad does not have (``torch_name``: "torch.nn.GRU")."""

    def __init__(self, torch_name: str):
        super().__init__(f"minigrad does not have {torch_name} yet")
        self.torch_name = torch_name


class MissingTorchModule(ModuleNotFoundError):
    """``import torch.xyz`` of a submodule minigrad does not have."""

    def __init__(self, torch_name: str):
        super().__init__(f"minigrad does not have {torch_name} yet", name=torch_name)
        self.torch_name = torch_name


class TorchModule(types.ModuleType):
    """The stand-in for one torch module: its attributes are the minigrad module's."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__path__ = []  # a package, so that ``import torch.nn`` looks further
        self._target_name = MODULES[name]

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "_target_name":
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if full in MODULES:
            return sys.modules.get(full) or importlib.import_module(full)
        if name in OVERRIDES.get(self.__name__, {}):
            return OVERRIDES[self.__name__][name]
        target = importlib.import_module(self._target_name)
        try:
            return getattr(target, name)
        except AttributeError:
            raise MissingTorchName(full) from None

    def __dir__(self):
        return sorted(set(dir(importlib.import_module(self._target_name))))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the stand-ins, and refuses every other torch submodule by name."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        if fullname not in MODULES:
            raise MissingTorchModule(fullname)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return TorchModule(spec.name)

    def exec_module(self, module) -> None:
        pass


def _is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


@contextmanager
def as_torch():
    """Inside it, ``import torch`` (and its submodules above) give minigrad; on exit
    ``sys.modules`` and the import system are as they were."""
    saved = {name: module for name, module in sys.modules.items() if _is_torch(name)}
    for name in saved:
        del sys.modules[name]
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _is_torch(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def missing_name(error: BaseException) -> str | None:
    """The torch name whose absence ``error`` reports ("torch.nn.GRU", "torch.Tensor.flip"),
    or None if it reports something else."""
    if isinstance(error, (MissingTorchName, MissingTorchModule)):
        return error.torch_name
    if isinstance(error, ImportError):  # from torch.nn import GRU
        match = _CANNOT_IMPORT.search(str(error))
        if match and match.group(2) in MODULES:
            return f"{match.group(2)}.{match.group(1)}"
        return None
    if isinstance(error, AttributeError) and error.name is not None:
        owner = _torch_name_of(error.obj)
        return f"{owner}.{error.name}" if owner else None
    return None


def _torch_name_of(obj) -> str | None:
    """torch's name for a minigrad class (or an instance of one): "torch.Tensor",
    "torch.nn.Linear"; None for anything else, your own classes included."""
    cls = obj if isinstance(obj, type) else type(obj)
    if not cls.__module__.startswith("minigrad"):
        return None
    for public in PUBLIC:
        module = importlib.import_module(public)
        if getattr(module, cls.__name__, None) is cls:
            return "torch" + public[len("minigrad") :] + "." + cls.__name__
    return None
