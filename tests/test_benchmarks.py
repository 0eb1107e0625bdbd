"""The benchmarks' own logic: the paired ratio, and a train_step run that finishes with the
two frameworks' losses in agreement (speed itself is never tested)."""

from __future__ import annotations

import math
import os
import sys

import pytest

import minigrad as mg

# the benchmarks live beside the package, not in it: import them from the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.train_step import SETTINGS, paired_ratio, run, set_threads  # noqa: E402


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


def test_train_step_runs_both_frameworks_on_the_same_losses():
    torch = pytest.importorskip("torch")
    row = run(SETTINGS["tiny"], steps=8, warmup=1, device="cpu", torch=torch, phases=True)
    assert row["loss_drift"] < 1e-5
    assert all(theirs > 0 for _, theirs in row["phases"].values())
    assert row["ratio"] == pytest.approx(row["minigrad_ms"] / row["torch_ms"])
    assert row["block_low"] <= row["block_ratio"] <= row["block_high"]
    assert row["minigrad_saved_mb"] > 0 and row["torch_saved_mb"] > 0


def test_train_step_splits_each_step_into_its_phases():
    row = run(SETTINGS["tiny"], steps=4, warmup=1, device="cpu", torch=None, phases=True)
    assert list(row["phases"]) == ["forward", "backward", "optimizer"]
    ours = [ms for ms, _ in row["phases"].values()]
    assert all(ms > 0 for ms in ours)
    assert all(theirs is None for _, theirs in row["phases"].values())  # no PyTorch given
    # each phase is a part of its step, so its median is below the steps' median
    assert max(ours) < row["minigrad_ms"]


def test_train_step_times_a_data_parallel_arm_on_the_same_losses():
    torch = pytest.importorskip("torch")
    row = run(SETTINGS["tiny"], steps=4, warmup=1, device="cpu", torch=torch, parallel=True)
    parallel = row["parallel"]
    assert parallel["loss_drift"] < 1e-5
    assert parallel["torch_ms"] == row["torch_ms"]  # the same PyTorch steps for both arms
    assert parallel["ratio"] == pytest.approx(parallel["minigrad_ms"] / parallel["torch_ms"])


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


def test_train_step_threads_option_puts_both_frameworks_and_blas_on_one_thread():
    torch = pytest.importorskip("torch")
    from threadpoolctl import threadpool_info, threadpool_limits

    before = mg.get_num_threads(), torch.get_num_threads()
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            mg.set_num_threads(2)
            torch.set_num_threads(2)
            set_threads(1, torch)
            blas = {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}
            assert mg.get_num_threads() == 1 and torch.get_num_threads() == 1
            assert blas <= {1}
    finally:
        mg.set_num_threads(before[0])
        torch.set_num_threads(before[1])
