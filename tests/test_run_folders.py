"""Run folders that cannot go wrong quietly: every way a checkpoint or config.json can be
damaged is one line and exit code 2 from train --resume, sample and graph, and costs nothing
already saved; training that diverges stops and keeps its last good checkpoint; SIGTERM
saves; a full disk is one line; a folder in use is refused; a larger --steps continues the
schedule; sizes that cannot fit are refused before anything is allocated."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad import serialization
from models import memory
from models.checkpoint import read_checkpoint
from models.cli import main
from models.config import config_for_task
from models.gpt import GPT, GPTConfig
from models.run import RunDir
from models.train import open_run, train

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--task", "copy", "--layers", "1", "--d-model", "8", "--heads", "2",
        "--batch-size", "4", "--eval-every", "4"]  # fmt: skip


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(code: int, err: str, *fragments: str, exit_code: int = 2) -> str:
    assert code == exit_code, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of the folder, by name, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    """The loss plot is tested with train; drawing it here would only cost time."""
    import models.train

    monkeypatch.setattr(models.train, "plot_loss", lambda run: None)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A finished 8-step run of the copy task, made once; tests work on copies of it."""
    path = tmp_path_factory.mktemp("runs") / "run"
    assert main(["train", *TINY, "--steps", "8", "--out", str(path)]) == 0
    return path


@pytest.fixture
def run_copy(trained_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    return copy


# -- damaged checkpoints and configs -------------------------------------------------------------


def rewrite_checkpoint(path: Path, edit) -> None:
    """Apply ``edit`` to the checkpoint's parsed layout, then store it with a fresh checksum:
    a file whose checksum holds, so that only the layout's own check can refuse it."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    with safe_open(str(path), framework="numpy") as file:
        metadata = file.metadata()
    layout = json.loads(metadata[serialization.LAYOUT_KEY])
    edit(layout)
    metadata[serialization.LAYOUT_KEY] = json.dumps(layout)
    arrays = load_file(str(path))
    views = {name: (a.dtype.name, a.shape, np.ascontiguousarray(a)) for name, a in arrays.items()}
    metadata[serialization.CHECKSUM_KEY] = serialization.checksum(views, metadata)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


def section(layout: dict, name: str) -> list:
    """The [key, node] pair of a top-level entry of a checkpoint's layout."""
    return next(pair for pair in layout["dict"] if pair[0] == name)


def truncate(run: Path) -> None:
    path = run / "checkpoint.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def damage_header(run: Path) -> None:
    path = run / "checkpoint.safetensors"
    data = bytearray(path.read_bytes())
    data[20:30] = b"}}}]]]{{{,"
    path.write_bytes(bytes(data))


def flip_a_bit(run: Path) -> None:
    path = run / "checkpoint.safetensors"
    data = bytearray(path.read_bytes())
    data[len(data) - 100] ^= 0x04  # inside the tensors: only the checksum can tell
    path.write_bytes(bytes(data))


def layout_entry_of_wrong_type(run: Path) -> None:
    rewrite_checkpoint(
        run / "checkpoint.safetensors", lambda l: section(l, "model").__setitem__(1, 5)
    )


def trainer_step_negative(run: Path) -> None:
    def edit(layout):
        section(section(layout, "trainer")[1], "step")[1] = {"value": -1}

    rewrite_checkpoint(run / "checkpoint.safetensors", edit)


def edit_config(change):
    def damage(run: Path) -> None:
        path = run / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(change(config)), encoding="utf-8")

    return damage


def set_in(config: dict, where: str, value) -> dict:
    section_name, key = where.split(".")
    config[section_name][key] = value
    return config


DAMAGE = {
    "truncated checkpoint": (truncate, "cut short"),
    "damaged header": (damage_header, "not valid JSON"),
    "bit-flipped checkpoint": (flip_a_bit, "is damaged: its checksum does not match"),
    "layout entry of the wrong type": (layout_entry_of_wrong_type, "layout entry 'model' is 5"),
    "config.json a list": (edit_config(lambda c: [c]), "it holds a list"),
    "config.json lacks train": (edit_config(lambda c: {k: v for k, v in c.items() if k != "train"}),
                                "its 'train' must be an object; it has none"),
    "config.json a string for a number": (edit_config(lambda c: set_in(c, "train.steps", "8")),
                                          "steps must be a whole number, got '8'"),
    "config.json not JSON": (lambda run: (run / "config.json").write_text("{"),
                             "not a readable config"),
}  # fmt: skip


@pytest.mark.parametrize("damage, message", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_run_is_one_line_and_exit_2_from_every_command(run_copy, damage, message, capsys):
    damage(run_copy)
    before = snapshot(run_copy)
    code, _, err = run_cli(["train", "--resume", str(run_copy)], capsys)
    assert_one_line(code, err, message)
    for argv in (["sample", "--run", str(run_copy)], ["graph", "--run", str(run_copy), "--out",
                 str(run_copy.parent / "g.dot")]):  # fmt: skip
        code, _, err = run_cli(argv, capsys)
        assert_one_line(code, err)
    assert snapshot(run_copy) == before, "nothing already saved changed"


def test_a_model_section_of_the_wrong_type_is_refused_by_sample(run_copy, capsys):
    edit_config(lambda c: set_in(c, "model.d_model", "8"))(run_copy)
    code, _, err = run_cli(["sample", "--run", str(run_copy)], capsys)
    assert_one_line(code, err, "d_model must be a whole number")


@pytest.mark.parametrize("command", ["train", "sample"])
def test_a_config_of_another_size_is_refused_before_building_it(run_copy, command, capsys):
    edit_config(lambda c: set_in(set_in(c, "train.d_model", 4096), "model.d_model", 4096))(run_copy)
    before = snapshot(run_copy)
    argv = ["train", "--resume"] if command == "train" else ["sample", "--run"]
    started = time.perf_counter()
    code, _, err = run_cli([*argv, str(run_copy)], capsys)
    assert_one_line(code, err, "do not belong together")
    assert time.perf_counter() - started < 5
    assert snapshot(run_copy) == before


def test_a_damaged_trainer_state_is_refused(run_copy, capsys):
    trainer_step_negative(run_copy)
    before = snapshot(run_copy)
    code, _, err = run_cli(["train", "--resume", str(run_copy), "--steps", "12"], capsys)
    assert_one_line(code, err, "trainer state is damaged")
    assert snapshot(run_copy) == before


# -- the other commands' options -----------------------------------------------------------------


@pytest.mark.parametrize("command", ["train", "sample", "graph", "study"])
def test_a_negative_seed_is_one_line_in_every_command(trained_run, tmp_path, command, capsys):
    argv = {
        "train": ["train", *TINY, "--seed", "-1", "--out", str(tmp_path / "new")],
        "sample": ["sample", "--run", str(trained_run), "--seed", "-1"],
        "graph": ["graph", "--seed", "-1", "--out", str(tmp_path / "g.svg")],
        "study": ["study", "depth", "--seeds", "-1", "--out", str(tmp_path / "study")],
    }[command]
    code, _, err = run_cli(argv, capsys)
    assert_one_line(code, err, "must be at least 0, got -1")
    assert list(tmp_path.iterdir()) == []


def test_a_seed_beyond_64_bits_is_one_line(trained_run, capsys):
    code, _, err = run_cli(["sample", "--run", str(trained_run), "--seed", str(2**64)], capsys)
    assert_one_line(code, err, "--seed must lie in [0, 2**64 - 1]")


def test_sample_on_cuda_without_a_gpu_is_one_line(trained_run, capsys):
    if mg.cuda.is_available():
        pytest.skip("a GPU is available here")
    code, _, err = run_cli(["sample", "--run", str(trained_run), "--device", "cuda"], capsys)
    assert_one_line(code, err, "--device cuda")


def test_graph_writes_dot_source_for_a_dot_file(tmp_path, capsys):
    out = tmp_path / "x.dot"
    code, stdout, err = run_cli(
        ["graph", "--layers", "1", "--d-model", "8", "--out", str(out)], capsys
    )
    assert code == 0, err
    assert out.read_text(encoding="utf-8").startswith("digraph")
    assert f"wrote {out}" in stdout


def test_graph_into_a_folder_writes_inside_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "figures"
    folder.mkdir()
    code, stdout, err = run_cli(
        ["graph", "--layers", "1", "--d-model", "8", "--out", "figures"], capsys
    )
    assert code == 0, err
    written = [p.name for p in folder.iterdir()]
    assert written and written[0].startswith("graph."), written
    assert not (tmp_path / "figures.svg").exists()


@pytest.mark.parametrize("command", ["graph", "study"])
def test_out_under_a_file_is_one_line(tmp_path, command, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    out = blocker / "sub" / ("g.svg" if command == "graph" else "")
    argv = (
        ["graph", "--out", str(out)]
        if command == "graph"
        else ["study", "depth", "--out", str(out)]
    )
    code, _, err = run_cli(argv, capsys)
    assert_one_line(code, err, "--out", "Not a directory")
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("command", ["graph", "study"])
def test_out_on_a_read_only_folder_is_one_line(tmp_path, command, capsys):
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user writes into read-only folders (root)")
        out = folder / "g.svg" if command == "graph" else folder
        argv = (
            ["graph", "--out", str(out)]
            if command == "graph"
            else ["study", "depth", "--out", str(out)]
        )
        code, _, err = run_cli(argv, capsys)
        assert_one_line(code, err, "--out", "cannot write there")
    finally:
        folder.chmod(0o755)


def test_graph_of_a_run_refuses_model_options(trained_run, tmp_path, capsys):
    out = str(tmp_path / "g.svg")
    code, _, err = run_cli(
        ["graph", "--run", str(trained_run), "--layers", "5", "--out", out], capsys
    )
    assert_one_line(code, err, "--layers does not go with --run", "fixes its model")
    assert not (tmp_path / "g.svg").exists()


# -- training that cannot go wrong quietly --------------------------------------------------------


def test_divergence_stops_with_one_line_and_keeps_a_finite_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    argv = [
        "train",
        *TINY,
        "--lr",
        "1000",
        "--steps",
        "300",
        "--eval-every",
        "16",
        "--out",
        str(run),
    ]
    code, out, err = run_cli(argv, capsys)
    line = assert_one_line(code, err, "training diverged at step", "lower --lr or add --grad-clip")
    assert "trained" not in out
    saved = read_checkpoint(run / "checkpoint.safetensors")
    kept_step = saved["trainer"]["step"]
    assert f"the checkpoint of step {kept_step} is kept" in line
    for name, value in saved["model"].items():
        assert np.isfinite(value.numpy()).all(), name
    for record in RunDir(run).read_metrics():
        assert all(math.isfinite(v) for v in record.values() if isinstance(v, float)), record


def test_a_nan_gradient_leaves_every_saved_file_as_it_was(run_copy, capsys, monkeypatch):
    import models.train

    before = snapshot(run_copy)
    monkeypatch.setattr(
        models.train, "clip_grad_norm_", lambda params, max_norm: mg.tensor(float("nan"))
    )
    code, _, err = run_cli(["train", "--resume", str(run_copy), "--steps", "12"], capsys)
    assert_one_line(
        code, err, "at step 9/12: the gradient norm is nan", "checkpoint of step 8 is kept"
    )
    after = snapshot(run_copy)
    assert after["checkpoint.safetensors"] == before["checkpoint.safetensors"]
    assert after["metrics.jsonl"] == before["metrics.jsonl"]


def test_a_full_disk_is_one_line_and_keeps_the_old_checkpoint(run_copy, capsys, monkeypatch):
    before = (run_copy / "checkpoint.safetensors").read_bytes()

    def disk_full(file, data):
        file.write(data[: len(data) // 3])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(serialization, "_write", disk_full)
    code, _, err = run_cli(["train", "--resume", str(run_copy), "--steps", "12"], capsys)
    assert_one_line(code, err, "cannot save the checkpoint", "No space left on device",
                    "the previous checkpoint is kept")  # fmt: skip
    assert (run_copy / "checkpoint.safetensors").read_bytes() == before
    assert not list(run_copy.glob(".*tmp*")), "the half-written file is gone"


def test_temporaries_of_killed_saves_are_removed_at_the_next_save(run_copy, capsys):
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # a process id that is no longer running
    stale = [run_copy / f".checkpoint.safetensors.{process.pid}.x1y2z3.tmp",
             run_copy / ".config.json.tmp-999999"]  # fmt: skip
    for path in stale:
        path.write_bytes(b"\0" * 4096)
    code, _, err = run_cli(["train", "--resume", str(run_copy), "--steps", "9"], capsys)
    assert code == 0, err
    assert not any(path.exists() for path in stale)


def test_a_folder_in_use_is_refused_with_the_holders_pid(run_copy, capsys):
    holder = RunDir(run_copy)
    holder.acquire()
    try:
        before = snapshot(run_copy)
        code, _, err = run_cli(["train", "--resume", str(run_copy), "--steps", "12"], capsys)
        assert_one_line(code, err, f"is in use by process {os.getpid()}")
        assert snapshot(run_copy) == before
    finally:
        holder.release()
    code, _, err = run_cli(["train", "--resume", str(run_copy), "--steps", "9"], capsys)
    assert code == 0, err
    assert not (run_copy / ".lock").exists(), "a run lets go of its folder when it ends"


def test_sigterm_saves_like_ctrl_c_and_a_second_run_is_refused_meanwhile(tmp_path, capsys):
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "models.cli", "train", *TINY, "--steps", "100000",
               "--eval-every", "100000", "--out", str(run_dir)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        metrics = run_dir / "metrics.jsonl"
        while not (metrics.exists() and metrics.stat().st_size) and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        code, _, err = run_cli(["train", "--resume", str(run_dir)], capsys)
        assert_one_line(code, err, f"is in use by process {process.pid}")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith("minigrad train: stopped by SIGTERM at step ")
    assert read_checkpoint(run_dir / "checkpoint.safetensors")["trainer"]["step"] >= 10


def test_a_larger_steps_continues_the_schedule_without_a_jump(tmp_path):
    config = config_for_task("copy", n_layers=1, d_model=8, n_heads=2, batch_size=4,
                             steps=20, warmup_steps=4, eval_every=100)  # fmt: skip
    stopped = train(config, out=tmp_path / "run", stop_at=10, echo=lambda line: None)
    saved_lr = read_checkpoint(stopped.run.checkpoint_path)["optimizer"]["param_groups"][0]["lr"]
    assert config.min_lr < saved_lr < config.lr, "stopped halfway down the cosine"

    lines: list[str] = []
    trainer, run = open_run(replace(config, steps=40), None, tmp_path / "run", echo=lines.append)
    try:
        assert lines == [
            f"resuming at step 10 with --steps 40 (it was 20): the learning rate goes on from "
            f"{saved_lr:.3g} along a cosine to {config.min_lr:.3g} until step 40"
        ]
        rates = [trainer.optimizer.param_groups[0]["lr"]]
        for _ in range(30):
            trainer.scheduler.step()
            rates.append(trainer.optimizer.param_groups[0]["lr"])
    finally:
        run.release()
    assert rates[0] == pytest.approx(saved_lr, rel=1e-12), "no jump at the resumed step"
    assert all(b <= a for a, b in zip(rates, rates[1:])), "it only decays"
    assert rates[-1] == pytest.approx(config.min_lr)
    steps = np.diff(rates)
    assert np.abs(steps).max() < (saved_lr - config.min_lr) / 10, "smoothly"


def test_the_continued_schedule_resumes_exactly(tmp_path):
    config = config_for_task("copy", n_layers=1, d_model=8, n_heads=2, batch_size=4,
                             steps=8, warmup_steps=2, eval_every=100)  # fmt: skip
    quiet = lambda line: None  # noqa: E731
    train(config, out=tmp_path / "a", echo=quiet)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    longer = replace(config, steps=16)
    train(longer, resume=tmp_path / "a", echo=quiet)
    train(longer, resume=tmp_path / "b", stop_at=12, echo=quiet)
    train(longer, resume=tmp_path / "b", echo=quiet)
    a = read_checkpoint(tmp_path / "a" / "checkpoint.safetensors")
    b = read_checkpoint(tmp_path / "b" / "checkpoint.safetensors")
    assert a["scheduler"] == b["scheduler"]
    assert a["scheduler"]["continued_from"]["step"] == 8
    for name, value in a["model"].items():
        np.testing.assert_array_equal(value.numpy(), b["model"][name].numpy(), err_msg=name)


# -- sizes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, value",
    [("--d-model", "1000000"), ("--d-ff", "100000000"), ("--batch-size", "100000000")],
)
def test_sizes_that_cannot_fit_are_refused_before_allocating(tmp_path, option, value, capsys):
    started = time.perf_counter()
    code, _, err = run_cli(
        ["train", "--task", "copy", option, value, "--out", str(tmp_path / "r")], capsys
    )
    assert_one_line(code, err, "need about", "is available on cpu", "lower --batch-size")
    assert time.perf_counter() - started < 5, "refused from the estimate, not by allocating"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("d_ff", [None, 24])
def test_the_parameter_estimate_counts_exactly(norm_first, d_ff):
    config = GPTConfig(vocab_size=11, block_size=7, d_model=8, n_heads=2, n_layers=2, d_ff=d_ff,
                       norm_first=norm_first)  # fmt: skip
    assert memory.parameter_count(config) == GPT(config).num_parameters()


def test_the_estimate_is_checked_against_the_memory_available(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(memory, "available_bytes", lambda device: 10 * 2**20)
    argv = ["train", *TINY, "--d-model", "256", "--steps", "1", "--out", str(tmp_path / "r")]
    code, _, err = run_cli(argv, capsys)
    assert_one_line(code, err, "but 10.0 MiB is available")
    assert memory.available_bytes("cpu") == 10 * 2**20
    monkeypatch.undo()
    assert memory.available_bytes("cpu") > 0, "MemAvailable is read on Linux"


def test_a_memory_error_is_one_line_naming_what_failed(tmp_path, monkeypatch, capsys):
    import models.commands.train

    message = (
        "Unable to allocate 3.64 TiB for an array with shape (1000000, 1000000) and data type "
        "float32"
    )

    def allocate(*args, **kwargs):
        raise MemoryError(message)

    monkeypatch.setattr(models.commands.train, "train", allocate)
    code, _, err = run_cli(["train", *TINY, "--out", str(tmp_path / "r")], capsys)
    assert_one_line(code, err, "out of memory", "shape (1000000, 1000000)")


def test_format_bytes():
    assert [memory.format_bytes(n) for n in (512, 1536, 3 * 2**30, 4 * 2**40)] == [
        "512 B", "1.5 KiB", "3.0 GiB", "4.0 TiB"
    ]  # fmt: skip
