"""The benchmarks' own logic: the paired ratio, and a train_step run that finishes with the
two frameworks' losses in agreement (speed itself is never tested)."""

from __future__ import annotations

import math
import os
import sys

import pytest

# the benchmarks live beside the package, not in it: import them from the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import train_step  # noqa: E402
from benchmarks.train_step import SETTINGS, paired_ratio  # noqa: E402


def test_paired_ratio_divides_neighbours():
    # a slow phase doubles both sides of the later pairs: each neighbours' ratio stays 1.25
    ours = [1.25, 1.25, 2.5, 2.5, 2.5]
    theirs = [1.0, 1.0, 2.0, 2.0, 2.0]
    median, lower, upper = paired_ratio(ours, theirs)
    assert median == pytest.approx(1.25) and lower == pytest.approx(1.25)
    assert upper == pytest.approx(1.25)


def test_paired_ratio_quartiles_and_few_blocks():
    median, lower, upper = paired_ratio([1.0, 2.0, 3.0, 4.0, 5.0], [1.0] * 5)
    assert (lower, median, upper) == (1.5, 3.0, 4.5)
    assert paired_ratio([3.0, 1.0], [1.0, 1.0]) == (2.0, 1.0, 3.0)
    assert all(math.isnan(v) for v in paired_ratio([], []))


def test_train_step_times_each_arm_in_turn_on_the_same_losses(capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(train_step, "SETTLE_S", 0.05)  # (speed is not tested: a shorter wait)
    ran = []  # the run's processes, kept as it stops them
    stop = train_step.Processes.__exit__
    monkeypatch.setattr(
        train_step.Processes, "__exit__", lambda self, *exc: (ran.append(self), stop(self, *exc))
    )
    rows = train_step.main(
        ["--configs", "tiny", "--steps", "7", "--warmup", "1", "--phases", "--parallel"]
        + ["--threads", "1", "--busy", "1", "--minigrad-env", "MINIGRAD_KEEP_FREED_MEMORY=0"]
        + ["--compare-env", "MINIGRAD_NUM_THREADS=1"]
    )
    text = capsys.readouterr().out
    row = rows["tiny"]
    assert row["loss_drift"] < 1e-5
    assert all(theirs > 0 for _, theirs in row["phases"].values())
    assert row["ratio"] == pytest.approx(row["minigrad_ms"] / row["torch_ms"])
    assert row["block_low"] <= row["block_ratio"] <= row["block_high"]
    assert row["minigrad_saved_mb"] > 0 and row["torch_saved_mb"] > 0
    for arm in ("parallel", "compare"):  # against the same PyTorch steps
        assert row[arm]["loss_drift"] < 1e-5
        assert row[arm]["torch_ms"] == row["torch_ms"]
        assert row[arm]["ratio"] == pytest.approx(row[arm]["minigrad_ms"] / row["torch_ms"])
    assert row["compare"]["minigrad_saved_mb"] == pytest.approx(row["minigrad_saved_mb"])
    for label in ("tiny", "tiny, DataParallel", "tiny, MINIGRAD_NUM_THREADS=1"):
        assert f"| {label} | " in text and f"| {label} | optimizer | " in text
    assert "1 busy process beside them" in text

    (processes,) = ran
    mine, second, theirs = (
        w.info for w in (processes.minigrad, processes.compare, processes.torch)
    )
    # each worker holds its own framework only
    assert mine["loaded"] == second["loaded"] == ["minigrad"] and theirs["loaded"] == ["torch"]
    # --threads 1: both frameworks, and NumPy's BLAS, on one thread
    assert mine["threads"] == theirs["threads"] == 1 and mine["blas"] in ("1", None)
    # each minigrad worker has its own variables, not the other's
    assert mine["env"]["MINIGRAD_KEEP_FREED_MEMORY"] == "0"
    assert second["env"]["MINIGRAD_NUM_THREADS"] == "1"
    assert mine["env"].get("MINIGRAD_NUM_THREADS") == os.environ.get("MINIGRAD_NUM_THREADS")
    kept = os.environ.get("MINIGRAD_KEEP_FREED_MEMORY")
    assert second["env"].get("MINIGRAD_KEEP_FREED_MEMORY") == kept
    # and nothing it started is left running
    children = processes.busy + [worker.process for worker in processes.workers()]
    assert len(children) == 4 and all(child.poll() is not None for child in children)


def test_train_step_splits_each_step_into_its_phases():
    row = train_step.run(
        SETTINGS["tiny"], steps=4, warmup=1, device="cpu", with_torch=False, phases=True
    )
    assert list(row["phases"]) == ["forward", "backward", "optimizer"]
    ours = [ms for ms, _ in row["phases"].values()]
    assert all(ms > 0 for ms in ours)
    assert all(theirs is None for _, theirs in row["phases"].values())  # no PyTorch given
    # each phase is a part of its step, so its median is below the steps' median
    assert max(ours) < row["minigrad_ms"]


def test_train_step_env_options_want_key_equals_value(capsys):
    with pytest.raises(SystemExit):
        train_step.main(["--compare-env", "MINIGRAD_NUM_THREADS"])
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_gelu_benchmark_times_both_forms_on_both_thread_counts():
    from benchmarks import gelu

    result = gelu.measure("minigrad", size=4096, calls=2)
    for form in gelu.FORMS:
        for threads in gelu.THREADS:
            forward_ms, backward_ms = result[f"{form} {threads}"]
            assert forward_ms > 0 and backward_ms > 0
        assert result[f"{form} error"] < 1e-6  # float32 rounding of the float64 value
    text = gelu.table({"minigrad": [result, result]}, 4096)
    assert "| exact | 2 | backward |" in text and "largest error" in text


def test_gelu_benchmark_runs_each_framework_in_a_process_of_its_own(capsys):
    from benchmarks import gelu

    gelu.main(["--rounds", "1", "--calls", "1", "--size", "2048"])
    text = capsys.readouterr().out
    assert "GELU over 2,048 float32 values" in text and "| tanh | 2 | forward |" in text
    assert "minigrad" in text
