"""mg.save / mg.load: safetensors round trips, PyTorch can read the files, a save is atomic,
and loading refuses pickles and any other non-safetensors file."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, serialization


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
    with pytest.raises(ValueError, match=r"evil\.ckpt is not a safetensors file.*pickle"):
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
