"""Checkpoints: ``mg.save(state, path)`` and ``mg.load(path)``, in the safetensors format.

A safetensors file is an 8-byte header length, a JSON header (names, dtypes, shapes, offsets
and a ``__metadata__`` dict of strings) and the raw array bytes. Loading one reads numbers
and never runs code, unlike a pickle, which can run anything it likes while it loads; so
``load`` refuses every file that is not safetensors. PyTorch reads the files directly:
``safetensors.torch.load_file(path)``.

What ``save`` accepts:

    mg.save(model.state_dict(), "model.safetensors")          # name -> Tensor (or array)
    mg.save({"model": model.state_dict(),                      # nested dicts and lists too:
             "optimizer": opt.state_dict(),                    # tensors are stored under
             "step": 1200, "config": {"d_model": 64}},         # dotted names ("model.head.
            "run/checkpoint.safetensors")                      # weight"), everything else
                                                               # as JSON in the metadata

``load`` gives back the same structure (tensors as Tensors, numbers as numbers, int dict keys
as ints). The layout is kept as JSON in the metadata entry ``"minigrad.layout"``; your own
strings go in ``metadata=`` and come back from ``load_metadata(path)``.

A save is atomic: the bytes go to a temporary file in the same folder, which then replaces
``path`` in one step (``os.replace``). A crash halfway leaves the old checkpoint as it was.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile

import numpy as np

from minigrad import backend
from minigrad.tensor import Tensor

LAYOUT_KEY = "minigrad.layout"
_MAX_HEADER = 100_000_000  # the safetensors library's own limit on the JSON header


def save(state, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write ``state`` (a dict of Tensors, arrays, numbers, strings, lists and dicts) to
    ``path`` as a safetensors file, atomically. ``metadata``: extra strings for the header."""
    from safetensors.numpy import save as to_bytes

    if not isinstance(state, dict):
        raise TypeError(f"save: expected a dict (such as a state_dict), got {type(state).__name__}")
    arrays: dict[str, np.ndarray] = {}
    layout = _encode(state, "", arrays)
    header = {str(k): str(v) for k, v in (metadata or {}).items()}
    if LAYOUT_KEY in header:
        raise ValueError(f"save: the metadata key {LAYOUT_KEY!r} is reserved")
    header[LAYOUT_KEY] = json.dumps(layout)
    _write_atomically(os.fspath(path), to_bytes(arrays, metadata=header))


def load(path: str | os.PathLike, device: str = "cpu", with_metadata: bool = False):
    """Read a safetensors file written by ``save`` (or by PyTorch's safetensors): tensors
    come back as Tensors on ``device``. Any other kind of file is refused, unread.

    ``with_metadata=True`` returns ``(state, metadata)``, metadata being the ``metadata=``
    strings given to ``save`` (as ``load_metadata`` reads them)."""
    from safetensors.numpy import load as from_bytes

    path = os.fspath(path)
    data = _read(path)
    header = _parse_header(data, path)
    device = backend.check_device(device)
    arrays = from_bytes(data)
    tensors = {name: _as_tensor(array, device) for name, array in arrays.items()}
    metadata = dict(header.get("__metadata__") or {})
    layout = metadata.pop(LAYOUT_KEY, None)
    if layout is None:  # a file from elsewhere: name -> tensor, in the order of the header
        order = [name for name in header if name != "__metadata__"]
        state = {name: tensors[name] for name in order}
    else:
        state = _decode(json.loads(layout), tensors)
    return (state, metadata) if with_metadata else state


def load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``metadata=`` strings that ``save`` stored in the header of ``path``."""
    path = os.fspath(path)
    header = _parse_header(_read(path), path)
    metadata = dict(header.get("__metadata__") or {})
    metadata.pop(LAYOUT_KEY, None)
    return metadata


# -- writing ---------------------------------------------------------------------------------


def _write_atomically(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as file:
            _write(file, data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)  # the one step that makes the new file visible
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def _write(file, data: bytes) -> None:
    """Write the bytes (a separate function so that tests can make it fail halfway)."""
    file.write(data)


def _encode(value, name: str, arrays: dict):
    """The JSON layout of ``value``; tensors and arrays go into ``arrays`` under ``name``."""
    if isinstance(value, (Tensor, np.ndarray)) or _is_device_array(value):
        array = value.array if isinstance(value, Tensor) else value
        if name in arrays:
            raise ValueError(f"save: two tensors would both be stored under the name {name!r}")
        if not name:
            raise ValueError("save: a tensor needs a name (save a dict of tensors)")
        arrays[name] = np.ascontiguousarray(backend.to_numpy(array))
        return {"tensor": name}
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise TypeError(f"save: dict keys must be str or int, got {key!r} in {name!r}")
            items.append([key, _encode(item, f"{name}.{key}" if name else str(key), arrays)])
        return {"dict": items}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_encode(item, f"{name}.{i}", arrays) for i, item in enumerate(value)]}
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(
        f"save: cannot store {name!r} of type {type(value).__name__} (tensors, arrays, "
        "numbers, strings, None, lists and dicts can be saved)"
    )


def _is_device_array(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "get")


# -- reading ---------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: no checkpoint file at {path}")
    with open(path, "rb") as file:
        return file.read()


def _parse_header(data: bytes, path: str) -> dict:
    """The JSON header, or a ValueError saying that ``path`` is not a safetensors file."""

    def refuse(reason: str):
        hint = ""
        if data[:1] == b"\x80" or data[:2] == b"PK":
            hint = " It looks like a pickle (or torch.save) file, which minigrad never loads."
        return ValueError(f"load: {path} is not a safetensors file ({reason}).{hint}")

    if len(data) < 10:
        raise refuse("too short")
    (length,) = struct.unpack("<Q", data[:8])
    if length > min(_MAX_HEADER, len(data) - 8) or data[8:9] != b"{":
        raise refuse("no safetensors header at the start")
    try:
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise refuse("its header is not valid JSON") from None
    if not isinstance(header, dict):
        raise refuse("its header is not a JSON object")
    return header


def _as_tensor(array: np.ndarray, device: str) -> Tensor:
    if not array.flags.writeable:
        array = array.copy()
    return Tensor(backend.to_device(array, device))


def _decode(layout: dict, tensors: dict):
    kind, body = next(iter(layout.items()))
    if kind == "tensor":
        return tensors[body]
    if kind == "dict":
        return {key: _decode(item, tensors) for key, item in body}
    if kind == "list":
        return [_decode(item, tensors) for item in body]
    if kind == "tuple":
        return tuple(_decode(item, tensors) for item in body)
    return body
