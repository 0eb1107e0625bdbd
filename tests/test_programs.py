"""PyTorch programs of the kind learners follow, run unchanged under PyTorch and under
``minigrad run``: a character-level GPT on a text file, a Dataset/DataLoader trainer with
parameter groups, clipping and a schedule, names models (bigram, MLP, RNN, GRU, LSTM), and an
encoder-decoder nn.Transformer on a copy task. They live in tests/programs/ and import torch
alone.

Each program is checked three ways: it finishes and its loss falls under minigrad; it does
the same under PyTorch; and, started from the same weights (written by the PyTorch run) on
the same batches, both frameworks print the same losses step by step.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS_DIR = Path(__file__).parent / "programs"
ROOT = Path(__file__).parent.parent

PROGRAMS = {
    "char_gpt": ["char_gpt.py"],
    "loader_trainer": ["loader_trainer.py"],
    "names_bigram": ["names.py", "--model", "bigram"],
    "names_mlp": ["names.py", "--model", "mlp"],
    "names_rnn": ["names.py", "--model", "rnn"],
    "names_gru": ["names.py", "--model", "gru"],
    "names_lstm": ["names.py", "--model", "lstm"],
    "copy_transformer": ["copy_transformer.py"],
}
STEPS = 25  # enough for every loss here to fall clearly
COMPARED_STEPS = 6
LOSS = re.compile(r"^step (\d+) loss ([-+0-9.eE]+|nan|inf)", re.M)


def run(framework: str, program: list[str], *args: str) -> list[float]:
    """Run a program under ``framework`` ("torch" or "minigrad"); the losses it printed."""
    script, *options = program
    command = [str(PROGRAMS_DIR / script), *options, *args]
    if framework == "minigrad":
        command = [sys.executable, "-m", "models.cli", "run", *command]
    else:
        command = [sys.executable, *command]
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, (
        f"{framework} {' '.join(program)}: exit {done.returncode}\n{done.stderr[-3000:]}"
    )
    losses = [(int(step), float(value)) for step, value in LOSS.findall(done.stdout)]
    assert [step for step, _ in losses] == list(range(len(losses))), done.stdout[-2000:]
    return [value for _, value in losses]


def assert_loss_falls(losses: list[float], steps: int) -> None:
    assert len(losses) == steps
    first, last = losses[0], sum(losses[-5:]) / 5
    assert last < first - 0.1, (
        f"the loss did not fall: {first:.4f} at the start, {last:.4f} at the end"
    )


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_program_trains_under_minigrad(name):
    assert_loss_falls(run("minigrad", PROGRAMS[name], "--steps", str(STEPS)), STEPS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_program_trains_under_torch(name):
    pytest.importorskip("torch")
    assert_loss_falls(run("torch", PROGRAMS[name], "--steps", str(STEPS)), STEPS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_both_frameworks_give_the_same_losses_from_the_same_weights(name, tmp_path):
    pytest.importorskip("torch")
    weights = tmp_path / "init.json"
    same = ["--steps", str(COMPARED_STEPS), "--ordered"]
    if name == "copy_transformer":
        same += ["--dropout", "0"]
    torch_losses = run("torch", PROGRAMS[name], *same, "--save-init", str(weights))
    minigrad_losses = run("minigrad", PROGRAMS[name], *same, "--init", str(weights))
    assert len(minigrad_losses) == len(torch_losses) == COMPARED_STEPS
    for step, (ours, theirs) in enumerate(zip(minigrad_losses, torch_losses)):
        assert ours == pytest.approx(theirs, rel=2e-4, abs=2e-5), (
            f"step {step}: minigrad {ours:.6f}, torch {theirs:.6f}\n"
            f"minigrad {minigrad_losses}\ntorch    {torch_losses}"
        )
