"""``minigrad run SCRIPT``: a PyTorch script runs on minigrad with its own exit status; a name
minigrad lacks ends it with one line (the name, the file, the line) and exit code 2; ``--graph``
draws the first backward's graph; ``sys.modules`` is as it was afterwards."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import minigrad as mg
from models.cli import main
from models.torch_shim import MissingTorchName, as_torch

ROOT = Path(__file__).resolve().parent.parent


def write(folder: Path, name: str, source: str) -> str:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return str(path)


MISSING = {  # the script after "import torch", the name it lacks, the line
    "an attribute of torch": (
        "x = torch.zeros(2)\ny = torch.not_a_torch_function(x)\n",
        "torch.not_a_torch_function",
        3,
    ),
    "a class of torch.nn": (
        "import torch.nn as nn\nlayer = nn.NotARealLayer(3)\n",
        "torch.nn.NotARealLayer",
        3,
    ),
    "a function of F": (
        "import torch.nn.functional as F\n\nF.not_a_function(torch.ones(1))\n",
        "torch.nn.functional.not_a_function",
        4,
    ),
    "a Tensor method": ("x = torch.ones(2)\nx.not_a_method(0)\n", "torch.Tensor.not_a_method", 3),
    "a from-import": ("from torch.nn import NotARealLayer\n", "torch.nn.NotARealLayer", 2),
    "a submodule": ("import torch.not_a_submodule\n", "torch.not_a_submodule", 2),
    "an optimizer": (
        "p = torch.zeros(1, requires_grad=True)\ntorch.optim.NotAnOptimizer([p])\n",
        "torch.optim.NotAnOptimizer",
        3,
    ),
}


@pytest.mark.parametrize("case", MISSING)
def test_a_missing_name_is_one_line_and_exit_code_2(case, tmp_path, capsys):
    body, name, line = MISSING[case]
    script = write(tmp_path, "uses_it.py", "import torch\n" + body)
    assert main(["run", script]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"minigrad run: the script uses {name} (uses_it.py:{line}), which minigrad does not "
        "have yet\n"
    )


def test_the_line_is_the_scripts_even_deep_inside_a_call(tmp_path, capsys):
    script = write(
        tmp_path,
        "deep.py",
        """\
        import torch


        def helper(x):
            return x.not_a_method()


        helper(torch.ones(1))
        """,
    )
    assert main(["run", script]) == 2
    assert "(deep.py:5)" in capsys.readouterr().err


def test_a_working_script_gets_its_arguments_and_exits_with_its_status(tmp_path, capsys):
    script = write(
        tmp_path,
        "status.py",
        """\
        import sys

        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        print(__name__, sys.argv[1:])
        model = nn.Linear(2, 1)
        loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)
        for x, y in loader:
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
        if sys.argv[1:] == ["--code", "3"]:
            sys.exit(3)
        """,
    )
    assert main(["run", script, "--code", "0"]) == 0
    assert capsys.readouterr().out == "__main__ ['--code', '0']\n"
    assert main(["run", script, "--code", "3"]) == 3
    assert sys.argv[0] != script  # (put back)


def test_a_failing_script_prints_its_traceback_and_exits_1(tmp_path, capsys):
    script = write(
        tmp_path,
        "fails.py",
        """\
        import torch


        def check(x):
            raise ValueError(f"bad value {x.shape}")


        check(torch.zeros(2))
        """,
    )
    assert main(["run", script]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert 'fails.py", line 5, in check' in err and err.endswith("ValueError: bad value (2,)\n")
    assert "runpy" not in err and "run.py" not in err


def test_no_such_script_is_a_usage_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "absent.py")]) == 2
    assert "no such script" in capsys.readouterr().err


RESIDUAL = """\
import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


model = nn.Sequential(Block(), Block())
for step in range(2):
    loss = (model(torch.randn(3, 4)) ** 2).mean()
    loss.backward()
print("still running")
"""


def test_graph_draws_the_first_backward_with_its_shortcuts(tmp_path, capsys):
    pytest.importorskip("graphviz")
    script = write(tmp_path, "residual.py", RESIDUAL)
    out = tmp_path / "graph.svg"
    assert main(["run", "--graph", str(out), script]) == 0
    captured = capsys.readouterr()
    assert captured.out == "still running\n"
    assert "2 gradient shortcuts" in captured.err
    written = out if out.exists() else out.with_suffix(".dot")  # (.dot without Graphviz)
    assert str(written) in captured.err
    drawing = written.read_text()
    assert "shortcut" in drawing and "2 gradient shortcuts" in drawing
    assert mg.Tensor.backward.__name__ == "backward" and "run" not in mg.Tensor.backward.__module__


def test_sys_modules_is_restored(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    importlib.import_module("torch.nn")  # (the real one, as the tests use it)

    before = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "torch"}
    script = write(tmp_path, "imports.py", "import torch.nn.functional\nimport torch.optim\n")
    assert main(["run", script]) == 0
    after = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "torch"}
    assert after == before and sys.modules["torch"] is torch
    assert not any(type(finder).__module__ == "models.torch_shim" for finder in sys.meta_path)


def test_as_torch_in_process():
    with as_torch():
        import torch
        import torch.nn.functional as F
        from torch.optim.lr_scheduler import StepLR

        assert torch.nn.Linear is mg.nn.Linear and F.softmax is mg.nn.functional.softmax
        assert torch.Tensor is mg.Tensor and StepLR is mg.optim.lr_scheduler.StepLR
        assert torch.utils.data.DataLoader is mg.utils.data.DataLoader
        assert not hasattr(torch, "not_a_torch_function")
        assert getattr(torch.nn, "NotALayer", None) is None
        with pytest.raises(MissingTorchName):
            torch.not_a_torch_function  # noqa: B018
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        assert torch.zeros(2, device=device).device == device.type
        assert torch.device("cpu") == "cpu" and torch.device("cpu").index is None


def test_save_and_load_a_state_dict(tmp_path, capsys):
    script = write(
        tmp_path,
        "checkpoint.py",
        """\
        import sys

        import torch
        import torch.nn as nn

        model = nn.Linear(3, 2)
        torch.save(model.state_dict(), sys.argv[1])
        fresh = nn.Linear(3, 2)
        fresh.load_state_dict(torch.load(sys.argv[1], map_location="cpu", weights_only=True))
        assert torch.equal(fresh.weight, model.weight) if hasattr(torch, "equal") else True
        print(bool((fresh.weight == model.weight).all()))
        """,
    )
    assert main(["run", script, str(tmp_path / "model.pt")]) == 0
    assert capsys.readouterr().out == "True\n"


def test_the_command_line_exit_codes(tmp_path):
    """Once through a real process: the status and the one line reach the shell."""
    absent = subprocess.run(
        [sys.executable, "-m", "models.cli", "run", str(tmp_path / "absent.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert absent.returncode == 2 and "no such script" in absent.stderr
    code = "import sys, torch\nx = torch.ones(1)\nsys.exit(int(sys.argv[1]))\n"
    script = write(tmp_path, "exit_status.py", code)
    done = subprocess.run(
        [sys.executable, "-m", "models.cli", "run", script, "5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 5, done.stderr
    assert done.stderr == ""
