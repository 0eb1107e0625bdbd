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

A file that ``save`` wrote carries a SHA-256 checksum of its tensors (names, dtypes, shapes,
bytes) and of its metadata, in the entry ``"minigrad.sha256"``. ``load`` checks every part
of a file before it uses it: the header, each tensor's dtype, shape and offsets, the layout
(against its schema, walked with a stack rather than by recursion, however deep it is
nested) and the checksum. Whatever is wrong ends in a ``CheckpointError`` (a ValueError)
that names the file and the fault.

A save is atomic: the bytes go to a temporary file in the same folder, which then replaces
``path`` in one step (``os.replace``). A crash halfway leaves the old checkpoint as it was;
temporary files left by a process that was killed while saving are removed by the next save.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import tempfile

import numpy as np

from minigrad import backend
from minigrad.errors import CheckpointError
from minigrad.tensor import Tensor

LAYOUT_KEY = "minigrad.layout"
CHECKSUM_KEY = "minigrad.sha256"
_MAX_HEADER = 100_000_000  # the safetensors library's own limit on the JSON header
_MAX_DIMS = 64  # NumPy's limit on the number of dimensions

# the safetensors dtypes that NumPy can hold (little-endian, as the format stores them)
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
    "C64": np.dtype("<c8"),
}
_KINDS = ("tensor", "dict", "list", "tuple", "value")


def save(state, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write ``state`` (a dict of Tensors, arrays, numbers, strings, lists and dicts) to
    ``path`` as a safetensors file, atomically. ``metadata``: extra strings for the header."""
    from safetensors.numpy import save as to_bytes

    if not isinstance(state, dict):
        raise TypeError(f"save: expected a dict (such as a state_dict), got {type(state).__name__}")
    arrays: dict[str, np.ndarray] = {}
    layout = _encode(state, "", arrays)
    header = {str(k): str(v) for k, v in (metadata or {}).items()}
    for reserved in (LAYOUT_KEY, CHECKSUM_KEY):
        if reserved in header:
            raise ValueError(f"save: the metadata key {reserved!r} is reserved")
    header[LAYOUT_KEY] = json.dumps(layout)
    views = {name: (array.dtype.name, array.shape, array) for name, array in arrays.items()}
    header[CHECKSUM_KEY] = checksum(views, header)
    _write_atomically(os.fspath(path), to_bytes(arrays, metadata=header))


def load(path: str | os.PathLike, device: str = "cpu", with_metadata: bool = False):
    """Read a safetensors file written by ``save`` (or by PyTorch's safetensors): tensors
    come back as Tensors on ``device``. Any other kind of file, and a damaged one, is refused
    with a ``CheckpointError`` naming the file and what is wrong.

    ``with_metadata=True`` returns ``(state, metadata)``, metadata being the ``metadata=``
    strings given to ``save`` (as ``load_metadata`` reads them)."""
    path = os.fspath(path)
    device = backend.check_device(device)
    data = _read(path)
    header, start = _parse_header(data, path)
    metadata = _metadata(header, path)
    views = _tensor_views(header, data, start, path)
    _verify_checksum(views, metadata, path)
    tensors = {name: _as_tensor(view, device) for name, view in views.items()}
    layout = metadata.pop(LAYOUT_KEY, None)
    metadata.pop(CHECKSUM_KEY, None)
    if layout is None:  # a file from elsewhere: name -> tensor, in the order of the header
        state = tensors
    else:
        state = _decode(_parse_json(layout, path, "its layout"), tensors, path)
    return (state, metadata) if with_metadata else state


def load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``metadata=`` strings that ``save`` stored in the header of ``path``."""
    path = os.fspath(path)
    header, _ = _parse_header(_read(path), path)
    metadata = _metadata(header, path)
    metadata.pop(LAYOUT_KEY, None)
    metadata.pop(CHECKSUM_KEY, None)
    return metadata


def checksum(tensors: dict, metadata: dict[str, str]) -> str:
    """SHA-256 (hex) of ``tensors`` (name -> (NumPy dtype name, shape, contiguous bytes or
    array)) and of every ``metadata`` entry but the checksum itself, in sorted order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        size = memoryview(data).nbytes
        digest.update(json.dumps(["tensor", name, dtype, list(shape), size]).encode())
        digest.update(memoryview(data).cast("B") if size else b"")
    for key in sorted(metadata):
        if key != CHECKSUM_KEY:
            digest.update(json.dumps(["metadata", key, metadata[key]]).encode())
    return digest.hexdigest()


# -- writing ---------------------------------------------------------------------------------


def _write_atomically(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}."
    _remove_stale_temporaries(folder, prefix)
    handle, temporary = tempfile.mkstemp(
        dir=folder, prefix=f"{prefix}{os.getpid()}.", suffix=".tmp"
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


def _remove_stale_temporaries(folder: str, prefix: str) -> None:
    """Remove ``.<name>.<pid>.<random>.tmp`` files whose process is gone (killed mid-save)."""
    for entry in os.listdir(folder):
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid = entry[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and _process_is_alive(int(pid)):
            continue  # another save of the same file may be writing it now
        try:
            os.remove(os.path.join(folder, entry))
        except OSError:
            pass


def _process_is_alive(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # on Windows os.kill(pid, 0) would end it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except (OverflowError, ValueError, OSError):
        return False
    return True


def _encode(value, name: str, arrays: dict):
    """The JSON layout of ``value``; tensors and arrays go into ``arrays`` under ``name``."""
    if isinstance(value, (Tensor, np.ndarray)) or _is_device_array(value):
        array = value.array if isinstance(value, Tensor) else value
        if name in arrays:
            raise ValueError(f"save: two tensors would both be stored under the name {name!r}")
        if not name:
            raise ValueError("save: a tensor needs a name (save a dict of tensors)")
        array = np.require(backend.to_numpy(array), requirements="C")  # 0-d stays 0-d
        if array.dtype.byteorder == ">":  # safetensors stores little-endian bytes
            array = array.astype(array.dtype.newbyteorder("<"))
        arrays[name] = array
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


# -- reading: the header ---------------------------------------------------------------------


def _read(path: str) -> bytes:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: no checkpoint file at {path}")
    with open(path, "rb") as file:
        return file.read()


def _not_safetensors(path: str, data: bytes, reason: str) -> CheckpointError:
    hint = ""
    if data[:1] == b"\x80" or data[:2] == b"PK":
        hint = " It looks like a pickle (or torch.save) file, which minigrad never loads."
    return CheckpointError(
        f"load: {path} is not a safetensors file, or it is damaged ({reason}).{hint}"
    )


def _damaged(path: str, reason: str) -> CheckpointError:
    return CheckpointError(f"load: {path} is damaged: {reason}")


def _parse_header(data: bytes, path: str) -> tuple[dict, int]:
    """The JSON header and where the tensor bytes start, or a CheckpointError."""
    if len(data) < 10:
        raise _not_safetensors(path, data, f"too short: {len(data)} bytes")
    (length,) = struct.unpack("<Q", data[:8])
    if length > _MAX_HEADER or data[8:9] != b"{":
        raise _not_safetensors(path, data, "no safetensors header at the start")
    if length > len(data) - 8:
        raise _not_safetensors(
            path, data, f"cut short: its header needs {length} bytes, only {len(data) - 8} follow"
        )
    try:
        text = data[8 : 8 + length].decode("utf-8")
    except UnicodeDecodeError:
        raise _not_safetensors(path, data, "its header is not valid UTF-8") from None
    header = _parse_json(text, path, "its header", data)
    if not isinstance(header, dict):
        raise _not_safetensors(path, data, "its header is not a JSON object")
    return header, 8 + length


def _parse_json(text: str, path: str, what: str, data: bytes = b""):
    try:
        return json.loads(text)
    except RecursionError:  # json's parser counts its depth and stops; nothing runs away
        raise _not_safetensors(path, data, f"{what} is JSON nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, or a number too long to read
        reason = f"{what} is not valid JSON: {str(error).splitlines()[0][:120]}"
        raise _not_safetensors(path, data, reason) from None


def _metadata(header: dict, path: str) -> dict[str, str]:
    metadata = header.get("__metadata__", {})
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise _damaged(path, f"its __metadata__ is a {_json_type(metadata)}, not an object")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise _damaged(
                path, f"its __metadata__ entry {key!r} is a {_json_type(value)}, not a string"
            )
    return dict(metadata)


def _tensor_views(header: dict, data: bytes, start: int, path: str) -> dict:
    """name -> (dtype, shape, bytes) of every tensor, each entry checked against the format:
    a known dtype, a shape of whole numbers >= 0 whose size fits its offsets, and offsets
    that tile the bytes after the header exactly."""
    body = len(data) - start
    views, spans = {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, begin, end = _tensor_entry(name, entry, path)
        needed = math.prod(shape) * DTYPES[dtype].itemsize
        if needed != end - begin:
            raise _damaged(
                path,
                f"tensor {name!r} of shape {tuple(shape)} and dtype {dtype} needs {needed} "
                f"bytes, but its data_offsets [{begin}, {end}] hold {end - begin}",
            )
        if end > body:
            raise _damaged(
                path,
                f"cut short: tensor {name!r} ends at byte {end} of the data, which holds only "
                f"{body} bytes",
            )
        spans.append((begin, end, name))
        views[name] = (dtype, tuple(shape), memoryview(data)[start + begin : start + end])
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            where = (
                "overlaps the one before"
                if begin < position
                else f"leaves a gap at byte {position}"
            )
            raise _damaged(path, f"tensor {name!r} {where}")
        position = end
    if position != body:
        raise _damaged(path, f"{body - position} bytes after the last tensor belong to none")
    return views


def _tensor_entry(name: str, entry, path: str) -> tuple[str, list[int], int, int]:
    def wrong(what: str) -> CheckpointError:
        return _damaged(path, f"tensor {name!r} in the header {what}")

    if not isinstance(entry, dict):
        raise wrong(f"is a {_json_type(entry)}, not an object")
    missing = {"dtype", "shape", "data_offsets"} - set(entry)
    if missing:
        raise wrong(f"has no {', '.join(sorted(missing))}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise wrong(f"has the dtype {dtype!r}, which is not one of {', '.join(DTYPES)}")
    if not isinstance(shape, list) or len(shape) > _MAX_DIMS or not all(map(_is_count, shape)):
        raise wrong(f"has the shape {_short(shape)}, not a list of whole numbers >= 0")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_count, offsets)):
        raise wrong(f"has data_offsets {_short(offsets)}, not two whole numbers >= 0")
    if offsets[0] > offsets[1]:
        raise wrong(f"has data_offsets {offsets} that end before they begin")
    return dtype, shape, offsets[0], offsets[1]


def _verify_checksum(views: dict, metadata: dict[str, str], path: str) -> None:
    saved = metadata.get(CHECKSUM_KEY)
    if saved is None:  # a file from elsewhere, without one
        return
    tensors = {
        name: (DTYPES[dtype].name, shape, raw) for name, (dtype, shape, raw) in views.items()
    }
    if checksum(tensors, metadata) != saved:
        raise _damaged(
            path,
            "its checksum does not match its contents (bytes changed after it was saved: "
            "a bit flipped on disk, a copy cut short, or an edit)",
        )


def _as_tensor(view: tuple, device: str) -> Tensor:
    dtype, shape, raw = view
    array = np.frombuffer(raw, dtype=DTYPES[dtype]).reshape(shape)
    array = array.astype(array.dtype.newbyteorder("="), copy=True)  # writable, native order
    return Tensor(backend.to_device(array, device))


# -- reading: the layout ---------------------------------------------------------------------


def _decode(layout, tensors: dict, path: str):
    """Rebuild the saved structure from its layout, checking each node against the schema

        node = {"tensor": name} | {"value": null, bool, number or string}
             | {"list": [node, ...]} | {"tuple": [node, ...]} | {"dict": [[key, node], ...]}

    with an explicit stack of (node, container, slot, name) instead of recursion, so that no
    file, however deeply it nests, can exhaust Python's stack."""
    root: list = [None]
    stack: list = [(layout, root, 0, "")]
    while stack:
        node, container, slot, name = stack.pop()
        if node is _TUPLE:  # every item of this tuple is filled in: freeze it
            container[slot] = tuple(container[slot])
            continue
        kind, body = _node(node, name, path)
        if kind == "tensor":
            if not isinstance(body, str) or body not in tensors:
                raise _damaged(
                    path, f"{_entry(name)} names the tensor {_short(body)}, which it does not hold"
                )
            container[slot] = tensors[body]
        elif kind == "value":
            if isinstance(body, (dict, list)):
                raise _damaged(path, f"{_entry(name)} holds {_short(body)} where a value belongs")
            container[slot] = body
        elif kind in ("list", "tuple"):
            if not isinstance(body, list):
                raise _damaged(path, f"{_entry(name)} holds {_short(body)} where a list belongs")
            items = [None] * len(body)
            container[slot] = items
            if kind == "tuple":
                stack.append((_TUPLE, container, slot, name))
            stack.extend((item, items, i, _child(name, i)) for i, item in enumerate(body))
        else:
            container[slot] = _dict_items(body, name, path, stack)
    return root[0]


_TUPLE = object()  # on the stack: turn the finished list at (container, slot) into a tuple


def _node(node, name: str, path: str) -> tuple[str, object]:
    if not isinstance(node, dict) or len(node) != 1:
        kinds = " | ".join(f'{{"{kind}": ...}}' for kind in _KINDS)
        raise _damaged(path, f"{_entry(name)} is {_short(node)}, not one of {kinds}")
    ((kind, body),) = node.items()
    if kind not in _KINDS:
        raise _damaged(path, f"{_entry(name)} is of the unknown kind {kind!r}")
    return kind, body


def _dict_items(body, name: str, path: str, stack: list) -> dict:
    """A dict with the keys of ``body`` ([[key, node], ...]); its nodes go on the stack."""
    if not isinstance(body, list):
        raise _damaged(path, f"{_entry(name)} holds {_short(body)} where [key, node] pairs belong")
    result: dict = {}
    for pair in body:
        if not isinstance(pair, list) or len(pair) != 2:
            raise _damaged(
                path, f"{_entry(name)} holds {_short(pair)} where a [key, node] pair belongs"
            )
        key, item = pair
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise _damaged(
                path, f"{_entry(name)} has the key {_short(key)}, not a string or an integer"
            )
        if key in result:
            raise _damaged(path, f"{_entry(name)} has the key {key!r} twice")
        result[key] = None
        stack.append((item, result, key, _child(name, key)))
    return result


# -- words for messages ----------------------------------------------------------------------


def _child(name: str, key) -> str:
    return f"{name}.{key}" if name else str(key)


def _entry(name: str) -> str:
    return f"the layout entry {name!r}" if name else "the layout"


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_type(value) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _short(value) -> str:
    """A JSON value in a few words: scalars and flat lists as JSON, cut to 60 characters."""
    if isinstance(value, dict):
        text = "an object with the keys " + ", ".join(map(str, list(value)[:4]))
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        text = f"a list of {len(value)} items"
    else:
        text = json.dumps(value[:20] if isinstance(value, list) else value)
    return text if len(text) <= 60 else text[:57] + "..."
