"""The training loop: exact resume, checkpoints, Ctrl-C, run folders and config checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from models.checkpoint import read_checkpoint
from models.config import TrainConfig, check_config, config_for_task, resumed_config
from models.errors import UsageError
from models.run import RunDir
from models.sample import load_model
from models.train import load_run_config, train

ROOT = Path(__file__).resolve().parents[1]

# a model small enough that a step takes milliseconds; dropout on, so that resuming must
# also restore minigrad's RNG
TINY = dict(
    task="copy", steps=20, batch_size=8, n_layers=1, d_model=16, n_heads=2, dropout=0.1,
    warmup_steps=4, eval_every=5, seed=3,
)  # fmt: skip


def tiny_config(**changes) -> TrainConfig:
    return config_for_task(**{**TINY, **changes})


def quiet(line: str) -> None:
    pass


def arrays(tree, prefix="") -> dict:
    """Every tensor of a nested checkpoint dict, as NumPy arrays under dotted names."""
    if isinstance(tree, mg.Tensor):
        return {prefix: tree.numpy()}
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return {}
    found = {}
    for key, value in items:
        found.update(arrays(value, f"{prefix}.{key}" if prefix else str(key)))
    return found


def test_stop_and_resume_ends_with_the_same_weights_as_one_run(tmp_path, device):
    # on the GPU without dropout: there it draws from CuPy's generator, whose state a
    # checkpoint does not hold (the trainer's "rng" is the CPU generator's)
    config = tiny_config(device=device, dropout=TINY["dropout"] if device == "cpu" else 0.0)
    assert_resume_is_exact(config, tmp_path)


def test_data_parallel_resumes_exactly_and_trains_as_the_plain_loop(tmp_path, two_threads):
    # dropout on: each half draws from its own generator, seeded from the CPU generator
    assert_resume_is_exact(tiny_config(data_parallel=True), tmp_path / "dropout")
    # dropout off: the same run as without DataParallel, up to float32 rounding
    results = [
        train(tiny_config(dropout=0.0, data_parallel=on), out=tmp_path / str(on), echo=quiet)
        for on in (False, True)
    ]
    plain, parallel = (arrays(read_checkpoint(r.run.checkpoint_path)) for r in results)
    for key in plain:
        if key.endswith("k_proj.bias"):
            # its gradient is 0 in exact arithmetic (softmax ignores a shift of every score):
            # rounding noise, whose sign AdamW's normalized steps follow
            continue
        np.testing.assert_allclose(parallel[key], plain[key], rtol=1e-3, atol=1e-5, err_msg=key)


def assert_resume_is_exact(config: TrainConfig, folder: Path) -> None:
    straight = train(config, out=folder / "straight", echo=quiet)
    first = train(config, out=folder / "split", stop_at=10, echo=quiet)
    assert (first.step, first.interrupted) == (10, True)
    resumed_from = RunDir(folder / "split")
    second = train(load_run_config(resumed_from), resume=resumed_from.path, echo=quiet)
    assert (second.step, second.interrupted, second.steps_done) == (20, False, 10)

    a = read_checkpoint(straight.run.checkpoint_path)
    b = read_checkpoint(second.run.checkpoint_path)
    a_arrays, b_arrays = arrays(a), arrays(b)
    assert a_arrays.keys() == b_arrays.keys()
    assert any(key.startswith("optimizer.state") for key in a_arrays)
    for key in a_arrays:
        np.testing.assert_array_equal(a_arrays[key], b_arrays[key], err_msg=key)
    as_json = lambda state: json.dumps(state, default=lambda t: t.tolist())  # noqa: E731
    assert as_json(a["trainer"]["rng"]) == as_json(b["trainer"]["rng"])
    assert a["scheduler"] == b["scheduler"]


def test_resume_keeps_one_metrics_record_per_step(tmp_path):
    train(tiny_config(), out=tmp_path, stop_at=10, echo=quiet)
    with open(tmp_path / "metrics.jsonl", "a") as file:  # as if killed after logging step 20
        file.write(json.dumps({"kind": "train", "step": 20, "loss": 1.0}) + "\n")
    train(load_run_config(RunDir(tmp_path)), resume=tmp_path, echo=quiet)
    train_steps = [r["step"] for r in RunDir(tmp_path).read_metrics() if r["kind"] == "train"]
    assert train_steps == [10, 20]


def test_run_folder_holds_config_checkpoint_metrics_and_plot(tmp_path):
    result = train(tiny_config(steps=10), out=tmp_path / "run", echo=quiet)
    run = result.run
    saved = json.loads(run.config_path.read_text(encoding="utf-8"))
    assert saved["train"]["d_model"] == 16 and saved["model"]["vocab_size"] == 12
    assert saved["train"]["block_size"] == 13, "the task's default is written down"
    records = run.read_metrics()
    assert {r["kind"] for r in records} == {"train", "eval"}
    assert all(r["tokens_per_s"] > 0 for r in records if r["kind"] == "train")
    assert "exact_match" in result.metrics and "val_loss" in result.metrics
    if _has_matplotlib():
        assert run.plot_path.stat().st_size > 0
    model, vocab = load_model(run.path)
    assert model.config.d_model == 16 and len(vocab) == 12
    assert not list(run.path.glob(".*tmp*")), "no temporary files left behind"


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_out_that_holds_a_run_is_refused_and_kept(tmp_path):
    train(tiny_config(steps=5), out=tmp_path, echo=quiet)
    before = (tmp_path / "checkpoint.safetensors").read_bytes()
    with pytest.raises(UsageError, match="already holds a run"):
        train(tiny_config(steps=5), out=tmp_path, echo=quiet)
    assert (tmp_path / "checkpoint.safetensors").read_bytes() == before


def test_default_run_folder_is_named_after_task_and_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = train(tiny_config(steps=2, eval_every=2), echo=quiet)
    assert result.run.path.parent == Path("runs")
    assert result.run.path.name.startswith("copy-")


# -- config checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"steps": 0}, "--steps"),
        ({"batch_size": -1}, "--batch-size"),
        ({"n_layers": 0}, "--layers"),
        ({"d_model": 30, "n_heads": 4}, "not divisible"),
        ({"lr": 0.0}, "--lr"),
        ({"min_lr": 1.0}, "--min-lr"),
        ({"dropout": 1.0}, "--dropout"),
        ({"warmup_steps": -1}, "--warmup"),
        ({"activation": "swish"}, "--activation"),
        ({"block_size": 0}, "--block-size"),
    ],
)
def test_nonsensical_settings_are_usage_errors(changes, message):
    with pytest.raises(UsageError, match=message):
        check_config(replace(TrainConfig(), **changes))


def test_resumed_config_takes_steps_but_refuses_other_changes():
    saved = TrainConfig(d_model=32, steps=100)
    assert resumed_config(saved, {"steps": 200, "d_model": 32}).steps == 200
    with pytest.raises(UsageError, match="--d-model 64 conflicts"):
        resumed_config(saved, {"d_model": 64})
    with pytest.raises(UsageError, match="--norm-first on conflicts"):
        resumed_config(saved, {"norm_first": True})


def test_a_block_too_short_for_the_task_is_refused(tmp_path):
    with pytest.raises(UsageError, match="too short for --task copy"):
        train(tiny_config(block_size=5), out=tmp_path / "run", echo=quiet)
    assert not (tmp_path / "run").exists(), "nothing is created for bad input"


# -- Ctrl-C --------------------------------------------------------------------------------------


def test_ctrl_c_saves_a_checkpoint_that_resumes(tmp_path):
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "models.cli", "train", "--task", "copy", "--steps",
               "100000", "--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size",
               "8", "--eval-every", "100000", "--out", str(run_dir)]  # fmt: skip
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
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith("minigrad train: stopped at step ")
    assert f"--resume {run_dir}" in last_line

    saved = read_checkpoint(run_dir / "checkpoint.safetensors")
    step = saved["trainer"]["step"]
    assert step >= 10
    model, _ = load_model(run_dir)
    for name, value in saved["model"].items():
        np.testing.assert_array_equal(model.state_dict()[name].numpy(), value.numpy())

    # resuming it with a nearer end finishes the run from there
    config = replace(load_run_config(RunDir(run_dir)), steps=step + 3, eval_every=1000)
    result = train(config, resume=run_dir, echo=quiet)
    assert (result.step, result.steps_done, result.interrupted) == (step + 3, 3, False)
