"""The ``minigrad`` command: bad input ends in exit code 2 and one line, never a traceback,
and never costs a saved run; ``sample`` continues a prompt with a trained run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import minigrad as mg
from models.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--task", "copy", "--layers", "1", "--d-model", "16", "--heads", "2",
        "--batch-size", "8", "--eval-every", "4"]  # fmt: skip


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``minigrad ARGV``, run in this process."""
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_usage_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A tiny finished run of the copy task (8 steps)."""
    path = tmp_path_factory.mktemp("cli") / "run"
    assert main(["train", *TINY, "--steps", "8", "--out", str(path)]) == 0
    return path


@pytest.fixture
def text_files(tmp_path) -> dict[str, Path]:
    files = {
        "latin1": tmp_path / "latin1.txt",
        "short": tmp_path / "short.txt",
        "folder": tmp_path / "folder",
    }
    files["latin1"].write_bytes("caf\xe9 au lait\n".encode("latin-1") * 50)
    files["short"].write_text("가나다라마바사\n" * 4, encoding="utf-8")
    files["folder"].mkdir()
    return files


BAD_TRAIN_INPUT = {
    "unknown task": (["--task", "poetry"], "invalid choice"),
    "text without file": (["--task", "text"], "needs --data"),
    "missing file": (["--task", "text", "--data", "{tmp}/nowhere.txt"], "no such file"),
    "non-UTF-8 file": (["--task", "text", "--data", "{latin1}"], "not UTF-8"),
    "file shorter than context": (["--task", "text", "--data", "{short}"], "too short"),
    "data is a folder": (["--task", "text", "--data", "{folder}"], "not a file"),
    "negative steps": (["--steps", "-5"], "--steps"),
    "zero steps": (["--steps", "0"], "--steps"),
    "steps not a number": (["--steps", "many"], "--steps"),
    "heads do not divide d_model": (["--d-model", "30", "--heads", "4"], "not divisible"),
    "negative lr": (["--lr", "-0.1"], "--lr"),
    "dropout of one": (["--dropout", "1"], "--dropout"),
    "block too short for the task": (["--task", "reverse", "--block-size", "4"], "too short"),
    "data for a built-in task": (["--data", "{short}"], "only for --task text"),
    "resume a missing run": (["--resume", "{tmp}/no-run"], "no such run folder"),
    "resume a folder that is no run": (["--resume", "{folder}"], "not a run folder"),
}


@pytest.mark.parametrize("argv, message", BAD_TRAIN_INPUT.values(), ids=BAD_TRAIN_INPUT.keys())
def test_bad_train_input_is_one_line_and_exit_code_2(argv, message, tmp_path, text_files, capsys):
    names = {"tmp": tmp_path, **text_files}
    argv = [arg.format(**names) for arg in argv]
    if "--resume" not in argv:
        argv += ["--out", str(tmp_path / "run")]
    code, out, err = run_cli(["train", *argv], capsys)
    assert_usage_error(code, err, message)
    assert not (tmp_path / "run").exists(), "bad input creates no run folder"


def test_cuda_without_a_gpu_is_a_usage_error(tmp_path, capsys):
    if mg.cuda.is_available():
        pytest.skip("a GPU is available here")
    code, _, err = run_cli(["train", *TINY, "--device", "cuda", "--out", str(tmp_path)], capsys)
    assert_usage_error(code, err, "--device cuda")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--d-model", "32"], "--d-model 32 conflicts"),
        (["--heads", "4"], "--heads 4 conflicts"),
        (["--task", "reverse"], "--task reverse conflicts"),
        (["--norm-first"], "--norm-first on conflicts"),
        (["--no-residual"], "--residual off conflicts"),
        (["--out", "elsewhere"], "do not go together"),
        (["--steps", "5"], "behind this run"),
    ],
)
def test_resume_with_another_config_is_refused_and_loses_nothing(
    trained_run, argv, message, capsys
):
    saved = {p.name: p.read_bytes() for p in trained_run.iterdir()}
    code, _, err = run_cli(["train", "--resume", str(trained_run), *argv], capsys)
    assert_usage_error(code, err, message)
    assert {p.name: p.read_bytes() for p in trained_run.iterdir()} == saved


def test_resume_of_a_damaged_checkpoint_is_a_usage_error(trained_run, tmp_path, capsys):
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_bytes((trained_run / "config.json").read_bytes())
    (damaged / "checkpoint.safetensors").write_bytes(b"\x80\x04\x95 pickled, not safetensors")
    code, _, err = run_cli(["train", "--resume", str(damaged)], capsys)
    assert_usage_error(code, err, "not a readable checkpoint")


def test_resume_with_more_steps_continues_the_run(trained_run, tmp_path, capsys):
    copy = tmp_path / "run"
    copy.mkdir()
    for path in trained_run.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    code, out, err = run_cli(["train", "--resume", str(copy), "--steps", "12"], capsys)
    assert code == 0, err
    assert "trained 4 steps" in out


def test_train_prints_samples_and_the_run_folder(tmp_path, capsys):
    code, out, err = run_cli(["train", *TINY, "--steps", "4", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    assert "step 4: val_loss" in out + err
    assert "samples:" in out and f"run folder: {tmp_path}" in out


def test_sample_continues_the_prompt(trained_run, capsys):
    argv = ["sample", "--run", str(trained_run), "--prompt", "12>", "--max-new-tokens", "5"]
    code, out, err = run_cli([*argv, "--temperature", "0"], capsys)
    assert code == 0, err
    assert out.startswith("12>") and len(out.rstrip("\n")) >= len("12>")
    code_again, out_again, _ = run_cli([*argv, "--temperature", "0"], capsys)
    assert out_again == out, "temperature 0 is greedy, so it repeats"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--run", "{tmp}/nothing"], "no such run folder"),
        (["--run", "{run}", "--prompt", "abc"], "never saw"),
        (["--run", "{run}", "--prompt", ""], "at least one character"),
        (["--run", "{run}", "--max-new-tokens", "-1"], "--max-new-tokens"),
    ],
)
def test_bad_sample_input_is_one_line_and_exit_code_2(trained_run, tmp_path, argv, message, capsys):
    argv = [arg.format(tmp=tmp_path, run=trained_run) for arg in argv]
    code, _, err = run_cli(["sample", *argv], capsys)
    assert_usage_error(code, err, message)


def test_the_console_command_runs_as_a_process(tmp_path):
    """The real entry point, in its own process: a bad option is one line on stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "models.cli", "train", "--steps", "-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_usage_error(result.returncode, result.stderr, "--steps")


def test_every_listed_command_has_a_subparser():
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    names = [command.__name__.rsplit(".", 1)[1] for command in COMMANDS]
    assert list(subparsers.choices) == names
    assert names[:4] == ["train", "sample", "graph", "study"]
