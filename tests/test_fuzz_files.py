"""Fuzzing what minigrad reads from disk: hypothesis damages a checkpoint (truncations at
every kind of boundary, bit flips, header edits, JSON of the wrong types, layouts edited
behind a valid checksum) and a run folder (config.json edits, damaged checkpoints).

Each damaged file must end in minigrad's own error (``CheckpointError`` from ``mg.load``,
exit code 2 and one line from the command line) or load as exactly what was saved; never
another exception, a hang or a crash; and no checkpoint already in the folder changes.
The examples are derandomized, so CI tries the same ones every time."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn, serialization
from minigrad.errors import CheckpointError
from models.cli import main

TRIED: dict[str, int] = {}  # damaged files tried, by kind (printed at the end with -s)


def fuzz(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    print(f"\ndamaged files tried: {sum(TRIED.values())} ({TRIED})")


def tried(kind: str) -> None:
    TRIED[kind] = TRIED.get(kind, 0) + 1


# -- a checkpoint to damage ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(folder, the file's bytes, what it holds, flattened) of a small nested checkpoint."""
    folder = tmp_path_factory.mktemp("fuzz")
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    optimizer = mg.optim.AdamW(model.parameters(), lr=1e-2)
    model(mg.randn(2, 3)).sum().backward()
    optimizer.step()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "trainer": {"step": 7, "note": "fuzz", "done": False, "none": None, "pair": (1, 2.5)},
        "ids": mg.arange(5),
    }
    path = folder / "checkpoint.safetensors"
    mg.save(state, path)
    return folder, path.read_bytes(), flatten(mg.load(path))


def flatten(value, prefix: str = "") -> list:
    """(name, type, value or (dtype, shape, bytes)) of every leaf, for exact comparison."""
    if isinstance(value, mg.Tensor):
        array = value.numpy()
        return [(prefix, "tensor", (array.dtype.str, array.shape, array.tobytes()))]
    if isinstance(value, dict):
        items = [(f"{prefix}.{key!r}", item) for key, item in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{prefix}[{i}]", item) for i, item in enumerate(value)]
        if not items:
            return [(prefix, type(value).__name__, None)]
    else:
        return [(prefix, type(value).__name__, value)]
    return [leaf for name, item in items for leaf in flatten(item, name)]


def load_damaged(folder: Path, data: bytes, original: list, kind: str) -> bool:
    """Load ``data`` as a file: True when refused with CheckpointError; anything that loads
    must be exactly what was saved. Any other exception fails the test."""
    tried(kind)
    path = folder / f"damaged-{kind}.safetensors"
    path.write_bytes(data)
    try:
        loaded = mg.load(path)
    except CheckpointError as error:
        assert str(path) in str(error)
        return True
    assert flatten(loaded) == original, "a damaged file loaded as something else"
    return False


def header_of(data: bytes) -> tuple[dict, bytes]:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def with_header(header, body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def boundaries(data: bytes) -> list[int]:
    """Where truncation hurts most: the length prefix, the header's ends, each tensor's ends."""
    header, body = header_of(data)
    start = len(data) - len(body)
    points = {0, 1, 7, 8, 9, start - 1, start, start + 1, len(data) - 1}
    for name, entry in header.items():
        if name != "__metadata__":
            for offset in entry["data_offsets"]:
                points.update({start + offset - 1, start + offset, start + offset + 1})
    return sorted(p for p in points if 0 <= p < len(data))


# JSON of every type: what an edit puts where something else belongs
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.sampled_from([2**31, 2**63, 2**64, 10**30, -(2**63)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["F32", "I64", "BOOL", "tensor", "dict", "", "nope", "model.0.weight"]),
    st.text(max_size=8),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)


def paths_in(tree) -> list[tuple]:
    """The path (keys and indices) of every node of a JSON tree, the root included."""
    found, stack = [], [((), tree)]
    while stack:
        path, node = stack.pop()
        found.append(path)
        if isinstance(node, dict):
            stack.extend((path + (key,), item) for key, item in node.items())
        elif isinstance(node, list):
            stack.extend((path + (i,), item) for i, item in enumerate(node))
    return found


def edited(tree, path: tuple, action: str, value):
    """A copy of ``tree`` with the node at ``path`` replaced by ``value`` or deleted."""
    tree = json.loads(json.dumps(tree))
    if not path:
        return value
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    if action == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return tree


# -- damaged files, through mg.load ---------------------------------------------------------------


def test_every_boundary_truncation_is_refused(saved):
    folder, data, original = saved
    for cut in boundaries(data):
        assert load_damaged(folder, data[:cut], original, "boundary truncation")


@fuzz(80)
@given(st.data())
def test_any_truncation_is_refused(saved, data):
    folder, content, original = saved
    cut = data.draw(st.integers(0, len(content) - 1))
    assert load_damaged(folder, content[:cut], original, "truncation")


@fuzz(120)
@given(flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 7)), min_size=1, max_size=3))
def test_bit_flips_are_refused_or_harmless(saved, flips):
    folder, content, original = saved
    damaged = bytearray(content)
    for position, bit in flips:
        damaged[position % len(damaged)] ^= 1 << bit
    load_damaged(folder, bytes(damaged), original, "bit flip")


@fuzz(80)
@given(st.data())
def test_header_edits_are_refused_or_harmless(saved, data):
    folder, content, original = saved
    header, body = header_of(content)
    path = data.draw(st.sampled_from(sorted(paths_in(header), key=repr)))
    action = data.draw(st.sampled_from(["replace", "delete"] if path else ["replace"]))
    value = data.draw(JSON)
    load_damaged(
        folder, with_header(edited(header, path, action, value), body), original, "header edit"
    )


@fuzz(60)
@given(header=JSON, body=st.binary(max_size=64))
def test_headers_of_any_json_never_leak(saved, header, body):
    folder, _, _ = saved
    tried("header of any JSON")
    path = folder / "any.safetensors"
    path.write_bytes(with_header(header, body))
    try:
        assert isinstance(mg.load(path), dict)
    except CheckpointError:
        pass


@fuzz(80)
@given(st.data())
def test_layout_edits_behind_a_valid_checksum_never_leak(saved, data):
    """The checksum recomputed after the edit: only the layout's schema stands guard."""
    folder, content, _ = saved
    header, body = header_of(content)
    metadata = header["__metadata__"]
    layout = json.loads(metadata[serialization.LAYOUT_KEY])
    path = data.draw(st.sampled_from(sorted(paths_in(layout), key=repr)))
    action = data.draw(st.sampled_from(["replace", "delete"] if path else ["replace"]))
    layout = edited(layout, path, action, data.draw(JSON))
    metadata = {**metadata, serialization.LAYOUT_KEY: json.dumps(layout)}
    metadata[serialization.CHECKSUM_KEY] = serialization.checksum(tensors_of(content), metadata)
    tried("layout edit")
    file = folder / "layout.safetensors"
    file.write_bytes(with_header({**header, "__metadata__": metadata}, body))
    try:
        mg.load(file)
    except CheckpointError as error:
        assert "layout" in str(error)


def tensors_of(content: bytes) -> dict:
    from safetensors.numpy import load

    return {
        name: (a.dtype.name, a.shape, np.ascontiguousarray(a)) for name, a in load(content).items()
    }


# -- damaged run folders, through the command line ----------------------------------------------


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    import models.train

    path = tmp_path_factory.mktemp("fuzz-run") / "run"
    argv = ["train", "--task", "copy", "--layers", "1", "--d-model", "8", "--heads", "2",
            "--batch-size", "4", "--eval-every", "4", "--steps", "4",
            "--out", str(path)]  # fmt: skip
    plot_loss, models.train.plot_loss = models.train.plot_loss, lambda run: None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0
    finally:
        models.train.plot_loss = plot_loss
    return path


def cli(argv: list[str]) -> tuple[int, str]:
    """(exit code, stderr) of ``minigrad ARGV`` in this process."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
    return code, err.getvalue()


def assert_clean_refusal(code: int, err: str) -> None:
    assert code in (0, 2), err
    if code == 2:
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def fresh_copy(trained_run: Path, name: str) -> Path:
    copy = trained_run.parent / name
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(trained_run, copy)
    return copy


@fuzz(60)
@given(st.data())
def test_config_edits_are_one_line_or_harmless_for_sample(trained_run, data):
    run = fresh_copy(trained_run, "sample")
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(sorted(paths_in(config), key=repr)))
    action = data.draw(st.sampled_from(["replace", "delete"] if path else ["replace"]))
    (run / "config.json").write_text(json.dumps(edited(config, path, action, data.draw(JSON))))
    checkpoint = (run / "checkpoint.safetensors").read_bytes()
    tried("config.json edit (sample)")
    code, err = cli(["sample", "--run", str(run), "--prompt", "1", "--max-new-tokens", "2"])
    assert_clean_refusal(code, err)
    assert (run / "checkpoint.safetensors").read_bytes() == checkpoint


@fuzz(30)
@given(st.data())
def test_config_edits_are_one_line_or_harmless_for_resume(trained_run, data):
    run = fresh_copy(trained_run, "resume")
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(sorted(paths_in(config), key=repr)))
    action = data.draw(st.sampled_from(["replace", "delete"] if path else ["replace"]))
    (run / "config.json").write_text(json.dumps(edited(config, path, action, data.draw(JSON))))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    tried("config.json edit (train --resume)")
    code, err = cli(["train", "--resume", str(run), "--steps", "4"])  # no step left to train
    assert_clean_refusal(code, err)
    if code == 2:
        assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@fuzz(40)
@given(cut=st.floats(0, 1, exclude_max=True), flips=st.lists(st.integers(0, 10**9), max_size=2))
def test_damaged_checkpoints_in_a_run_folder_are_exit_2(trained_run, cut, flips):
    run = fresh_copy(trained_run, "checkpoint")
    path = run / "checkpoint.safetensors"
    damaged = bytearray(path.read_bytes())
    for position in flips:
        damaged[position % len(damaged)] ^= 0x20
    if not flips:  # truncate instead
        damaged = damaged[: int(cut * len(damaged))]
    path.write_bytes(bytes(damaged))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    tried("checkpoint in a run folder")
    code, err = cli(["train", "--resume", str(run), "--steps", "6"])
    if code != 2:  # a flip of a byte that only names the checksum's key: still the same file
        assert code == 0 and flips, err
        return
    assert_clean_refusal(code, err)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
