"""mg.save / mg.load: safetensors round trips, PyTorch can read the files, a save is atomic,
and loading refuses pickles, any other non-safetensors file and every damaged or crafted one
with a CheckpointError naming the file and the fault."""

from __future__ import annotations

import errno
import json
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, serialization
from minigrad.errors import CheckpointError


def small_model() -> nn.Module:
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))


def test_state_dict_round_trip(tmp_path):
    model = small_model()
    path = tmp_path / "model.safetensors"
    mg.save(model.state_dict(), path)
    loaded = mg.load(path)
    assert list(loaded) == list(model.state_dict())
    for name, value in model.state_dict().items():
        assert isinstance(loaded[name], mg.Tensor) and loaded[name].device == "cpu"
        assert loaded[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded[name].numpy(), value.numpy())
    other = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))
    other.load_state_dict(loaded)
    x = mg.randn(2, 4)
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_dtypes_survive(tmp_path, dtype):
    array = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    mg.save({"x": mg.tensor(array, dtype=dtype)}, tmp_path / "x.safetensors")
    loaded = mg.load(tmp_path / "x.safetensors")["x"]
    assert loaded.dtype == dtype
    np.testing.assert_array_equal(loaded.numpy(), array)


def test_nested_state_with_numbers_and_optimizer_round_trips(tmp_path):
    model = small_model()
    optimizer = mg.optim.AdamW(model.parameters(), lr=1e-2)
    model(mg.randn(3, 4)).sum().backward()
    optimizer.step()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": 7,
        "config": {"d_model": 8, "norm_first": False, "name": "tiny", "sizes": [1, 2]},
    }
    path = tmp_path / "checkpoint.safetensors"
    mg.save(state, path, metadata={"note": "hello"})
    loaded = mg.load(path)
    assert loaded["step"] == 7 and loaded["config"] == state["config"]
    assert serialization.load_metadata(path) == {"note": "hello"}
    again, metadata = mg.load(path, with_metadata=True)
    assert metadata == {"note": "hello"} and again["step"] == 7
    saved_state = optimizer.state_dict()
    assert loaded["optimizer"]["param_groups"] == saved_state["param_groups"]
    assert set(loaded["optimizer"]["state"]) == set(saved_state["state"])  # int keys again
    first = loaded["optimizer"]["state"][0]
    assert first["step"] == 1
    np.testing.assert_array_equal(first["exp_avg"].numpy(), saved_state["state"][0]["exp_avg"])


def test_pytorch_reads_a_minigrad_checkpoint(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    model = small_model()
    path = tmp_path / "model.safetensors"
    mg.save(model.state_dict(), path)
    loaded = safetensors_torch.load_file(str(path))
    assert set(loaded) == set(model.state_dict())
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(loaded[name].numpy(), value.numpy())


def test_minigrad_reads_a_pytorch_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    weights = {"layer.weight": torch.randn(3, 2), "layer.bias": torch.zeros(3)}
    safetensors_torch.save_file(weights, str(tmp_path / "t.safetensors"))
    loaded = mg.load(tmp_path / "t.safetensors")
    assert set(loaded) == set(weights)
    np.testing.assert_array_equal(loaded["layer.weight"].numpy(), weights["layer.weight"].numpy())


def test_a_crash_while_writing_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    mg.save({"w": mg.ones(4)}, path)
    before = path.read_bytes()

    def crash_halfway(file, data):
        file.write(data[: len(data) // 2])
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(serialization, "_write", crash_halfway)
    with pytest.raises(KeyboardInterrupt):
        mg.save({"w": mg.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.safetensors"]  # no temporary file left behind
    np.testing.assert_array_equal(mg.load(path)["w"].numpy(), np.ones(4))


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


def test_a_pickle_is_refused_without_running_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.ckpt"
    path.write_bytes(pickle.dumps({"w": _Exploit()}))
    with pytest.raises(CheckpointError, match=r"evil\.ckpt is not a safetensors file.*pickle"):
        mg.load(path)
    assert not (tmp_path / "pwned.txt").exists()


def test_a_torch_save_file_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, str(path))
    with pytest.raises(ValueError, match="not a safetensors file"):
        mg.load(path)


@pytest.mark.parametrize(
    "content",
    [b"", b"hello world, not a checkpoint", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all",
     b"\xff" * 64],
    ids=["empty", "text", "broken_header", "garbage"],
)  # fmt: skip
def test_other_files_are_refused_with_the_path(tmp_path, content):
    path = tmp_path / "weights.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="weights.bin is not a safetensors file"):
        mg.load(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        mg.load(tmp_path / "nothing.safetensors")


def test_unsaveable_values_are_named(tmp_path):
    with pytest.raises(TypeError, match="'opt.fn'"):
        mg.save({"opt": {"fn": print}}, tmp_path / "x.safetensors")


def test_load_to_cuda(tmp_path, device):
    mg.save({"w": mg.arange(3)}, tmp_path / "w.safetensors")
    loaded = mg.load(tmp_path / "w.safetensors", device=device)
    assert loaded["w"].device == device
    assert loaded["w"].tolist() == [0, 1, 2]


# -- crafted and damaged files -------------------------------------------------------------------


def safetensors_bytes(header: dict | list | str, body: bytes = b"") -> bytes:
    """A file of the safetensors format: length, JSON header (given as is when a str), body."""
    text = header if isinstance(header, str) else json.dumps(header)
    encoded = text.encode("utf-8")
    return struct.pack("<Q", len(encoded)) + encoded + body


def one_tensor(dtype="F32", shape=(2,), offsets=(0, 8), metadata=None) -> dict:
    header = {"w": {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}}
    if metadata is not None:
        header["__metadata__"] = metadata
    return header


def layout_file(layout, body: bytes = b"\x00" * 8) -> bytes:
    """A file with the tensor "w" (2 float32) and ``layout`` (not JSON-encoded when a str)."""
    text = layout if isinstance(layout, str) else json.dumps(layout)
    return safetensors_bytes(one_tensor(metadata={serialization.LAYOUT_KEY: text}), body)


CRAFTED = {
    "truncated body": (safetensors_bytes(one_tensor(offsets=(0, 8)), b"\x00" * 5), "cut short"),
    "header cut short": (struct.pack("<Q", 500) + b'{"w": {"dtype": "F32"', "cut short"),
    "header not JSON": (safetensors_bytes('{"w": {"dtype": "F32",,}}'), "not valid JSON"),
    "header a list": (safetensors_bytes("[1, 2, 3]   "), "no safetensors header"),
    "header not UTF-8": (struct.pack("<Q", 4) + b"{\xff\xfe}", "not valid UTF-8"),
    "overflowing shape": (
        safetensors_bytes(one_tensor(shape=(2**62, 2**62)), b"\x00" * 8),
        f"needs {2**126} bytes",
    ),
    "negative shape": (safetensors_bytes(one_tensor(shape=(-2,)), b"\x00" * 8), "the shape [-2]"),
    "shape of strings": (safetensors_bytes(one_tensor(shape=("2",)), b"\x00" * 8), "shape"),
    "unknown dtype": (safetensors_bytes(one_tensor(dtype="F128"), b"\x00" * 8), "F128"),
    "dtype a number": (safetensors_bytes(one_tensor(dtype=4), b"\x00" * 8), "dtype 4"),
    "offsets backwards": (safetensors_bytes(one_tensor(offsets=(8, 0)), b"\x00" * 8), "end before"),
    "offsets of three": (
        safetensors_bytes(one_tensor(offsets=(0, 4, 8)), b"\x00" * 8),
        "data_offsets",
    ),
    "entry a number": (safetensors_bytes({"w": 5}), "'w' in the header is a number"),
    "entry lacks shape": (
        safetensors_bytes({"w": {"dtype": "F32", "data_offsets": [0, 0]}}),
        "no shape",
    ),
    "bytes left over": (safetensors_bytes(one_tensor(), b"\x00" * 12), "4 bytes after the last"),
    "metadata a list": (
        safetensors_bytes(one_tensor(metadata=[1]), b"\x00" * 8),
        "__metadata__ is a list",
    ),
    "metadata a number": (
        safetensors_bytes(one_tensor(metadata={"note": 3}), b"\x00" * 8),
        "entry 'note' is a number",
    ),
    "layout names a missing tensor": (layout_file({"dict": [["w", {"tensor": "nope"}]]}), '"nope"'),
    "layout not JSON": (layout_file("{dict: oops"), "its layout is not valid JSON"),
    "layout nested 100,000 deep": (
        layout_file('{"list": [' * 100_000 + "]}" * 100_000),
        "nested too deeply",
    ),
    "layout entry a number": (layout_file({"dict": [["w", 5]]}), "layout entry 'w' is 5"),
    "layout dict of a number": (layout_file({"dict": 5}), "where [key, node] pairs belong"),
    "layout pair of three": (layout_file({"dict": [["w", {"value": 1}, 3]]}), "[key, node] pair"),
    "layout key a list": (
        layout_file({"dict": [[[1], {"value": 1}]]}),
        "not a string or an integer",
    ),
    "layout key twice": (
        layout_file({"dict": [["a", {"value": 1}], ["a", {"value": 2}]]}),
        "twice",
    ),
    "layout kind unknown": (layout_file({"pickle": "os.system"}), "unknown kind 'pickle'"),
    "layout tensor name a number": (layout_file({"tensor": 3}), "names the tensor 3"),
    "layout list of a string": (layout_file({"list": "abc"}), "where a list belongs"),
    "layout value a list": (layout_file({"value": [1, 2]}), "where a value belongs"),
    "layout node of two kinds": (layout_file({"value": 1, "tensor": "w"}), "not one of"),
}


@pytest.mark.parametrize("content, message", CRAFTED.values(), ids=CRAFTED.keys())
def test_crafted_files_are_a_checkpoint_error_naming_file_and_fault(tmp_path, content, message):
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as caught:
        mg.load(path)
    assert str(path) in str(caught.value) and message in str(caught.value)
    assert isinstance(caught.value, ValueError), "except ValueError keeps working"
    assert path.read_bytes() == content, "loading never writes"


def test_a_deep_layout_is_rebuilt_without_recursion(tmp_path):
    state: dict = {"w": mg.ones(2)}
    inner = state
    for depth in range(150):  # lists, tuples and dicts in turn, 150 levels down
        kind = (list, tuple, dict)[depth % 3]
        child: dict = {"leaf": depth}
        inner["next"] = kind([child]) if kind is not dict else {"only": child}
        inner = child
    path = tmp_path / "deep.safetensors"
    mg.save(state, path)
    loaded = mg.load(path)
    node, depth = loaded, 0
    while "next" in node:
        wrapper = node["next"]
        assert isinstance(wrapper, (list, tuple, dict)[depth % 3])
        node = wrapper["only"] if isinstance(wrapper, dict) else wrapper[0]
        assert node["leaf"] == depth
        depth += 1
    assert depth == 150


def saved_checkpoint(tmp_path):
    model = small_model()
    path = tmp_path / "checkpoint.safetensors"
    mg.save({"model": model.state_dict(), "step": 7, "shape": (2, 3)}, path)
    return path, model


def test_a_save_carries_a_checksum_of_tensors_and_metadata(tmp_path):
    path, _ = saved_checkpoint(tmp_path)
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as file:
        metadata = file.metadata()
    assert len(metadata[serialization.CHECKSUM_KEY]) == 64
    assert serialization.load_metadata(path) == {}, "the checksum is not the user's metadata"


def test_a_bit_flipped_tensor_is_damaged_not_loaded(tmp_path):
    path, _ = saved_checkpoint(tmp_path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10  # inside the last tensor's bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is damaged: its checksum does not match"):
        mg.load(path)


def test_an_edited_number_in_the_layout_is_damaged(tmp_path):
    path, _ = saved_checkpoint(tmp_path)
    data = path.read_bytes()
    assert data.count(b'{\\"value\\": 7}') == 1
    path.write_bytes(data.replace(b'{\\"value\\": 7}', b'{\\"value\\": 8}'))
    with pytest.raises(CheckpointError, match="checksum does not match"):
        mg.load(path)


def test_a_file_without_checksum_still_loads(tmp_path):
    from safetensors.numpy import save_file

    save_file({"w": np.arange(3, dtype=np.float32)}, str(tmp_path / "plain.safetensors"))
    assert mg.load(tmp_path / "plain.safetensors")["w"].tolist() == [0.0, 1.0, 2.0]


def test_a_full_disk_is_an_oserror_that_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    mg.save({"w": mg.ones(4)}, path)
    before = path.read_bytes()

    def disk_full(file, data):
        file.write(data[:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(serialization, "_write", disk_full)
    with pytest.raises(OSError, match="No space left"):
        mg.save({"w": mg.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.safetensors"]


def dead_pid() -> int:
    """The id of a process that has just ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_temporaries_of_killed_saves_are_removed_by_the_next_save(tmp_path):
    path = tmp_path / "model.safetensors"
    stale = [
        tmp_path / f".model.safetensors.{dead_pid()}.k9xq2p.tmp",  # killed mid-save
        tmp_path / ".model.safetensors.a1b2c3d4.tmp",  # written before temporaries named a pid
    ]
    live = tmp_path / f".model.safetensors.{os.getppid()}.w7e1zz.tmp"  # a save going on now
    other = tmp_path / ".other.safetensors.12.abc.tmp"  # another file's: not ours to remove
    for temporary in [*stale, live, other]:
        temporary.write_bytes(b"\x00" * 1000)
    mg.save({"w": mg.ones(2)}, path)
    assert not any(t.exists() for t in stale)
    assert live.exists() and other.exists()
    assert mg.load(path)["w"].tolist() == [1.0, 1.0]


def test_zero_dimensional_tensors_keep_their_shape(tmp_path):
    mg.save({"scalar": mg.tensor(2.5), "count": np.array(3)}, tmp_path / "s.safetensors")
    loaded = mg.load(tmp_path / "s.safetensors")
    assert loaded["scalar"].shape == () and loaded["scalar"].item() == 2.5
    assert loaded["count"].shape == () and loaded["count"].item() == 3
