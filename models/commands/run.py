"""``minigrad run SCRIPT [ARGS...]``: run an unmodified PyTorch script with minigrad standing
in for torch.

    minigrad run train_gpt.py --steps 100
    minigrad run --graph graph.svg train_gpt.py     also draw the first backward's graph

The script runs as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]``, inside
``models.torch_shim.as_torch()``, and the command exits with the script's own status: its
``sys.exit`` code, 0 when it ends, 1 (after its traceback) when it raises. Where it reaches for
a name of torch that minigrad does not have yet, it stops with one line naming it, the file
and the line, and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from contextlib import contextmanager, nullcontext
from pathlib import Path

import minigrad as mg
from minigrad.tensor import Tensor
from models.errors import UsageError
from models.torch_shim import as_torch, missing_name

PROG = "minigrad run"
_HERE = (Path(mg.__file__).parent, Path(__file__).parent.parent)  # minigrad/, models/


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a PyTorch script with minigrad standing in for torch",
        description=(
            "Run a PyTorch script unchanged, with `import torch` giving minigrad. The command "
            "exits with the script's status; a torch name minigrad lacks ends it with one "
            "line and exit code 2."
        ),
    )
    parser.add_argument(
        "--graph",
        metavar="FILE",
        help="after the script's first backward(), draw its graph (shortcuts and gradient "
        "norms) to FILE (.svg, .png, .pdf or .dot)",
    )
    parser.add_argument("script", help="the Python file to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not Path(args.script).is_file():
        raise UsageError(f"no such script: {args.script}")
    return run_script(args.script, args.args, graph=args.graph)


def run_script(script: str, argv: list[str], graph: str | None = None) -> int:
    """Run ``script`` as ``__main__`` with ``argv`` under ``as_torch()``; its exit code."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *argv]
    sys.path.insert(0, str(Path(script).resolve().parent))  # as `python script.py` does
    try:
        with as_torch(), draw_first_backward(graph) if graph else nullcontext():
            runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as done:
        return _exit_code(done.code)
    except Exception as error:
        name = missing_name(error)
        if name is None:
            _print_script_traceback(error)
            return 1
        where = _where(error)
        print(
            f"{PROG}: the script uses {name} ({where}), which minigrad does not have yet",
            file=sys.stderr,
        )
        return 2
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _exit_code(code) -> int:
    """What ``sys.exit(code)`` makes the process's status, as Python does it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _is_ours(filename: str) -> bool:
    """Whether a frame's file is minigrad's, models', or the machinery that runs the script."""
    if filename.startswith("<") or filename == runpy.__file__:
        return True
    path = Path(filename).resolve()
    return any(path.is_relative_to(folder) for folder in _HERE)


def _script_frames(error: BaseException) -> list:
    return [
        frame for frame in traceback.extract_tb(error.__traceback__) if not _is_ours(frame.filename)
    ]


def _where(error: BaseException) -> str:
    """file.py:line of the script's innermost frame in the traceback of ``error``."""
    frames = _script_frames(error)
    if not frames:
        return "at import"
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}"


def _print_script_traceback(error: BaseException) -> None:
    """The traceback as Python prints it, from the script's first frame on."""
    frames = traceback.extract_tb(error.__traceback__)
    first = next((i for i, f in enumerate(frames) if not _is_ours(f.filename)), 0)
    lines = ["Traceback (most recent call last):\n"]
    lines += traceback.format_list(frames[first:])
    lines += traceback.format_exception_only(type(error), error)
    sys.stderr.write("".join(lines))


@contextmanager
def draw_first_backward(path: str):
    """While it lasts, the first ``backward()`` records each edge's gradient norm
    (``viz.record_grads``), then draws its graph to ``path`` and prints where; later
    backward calls run as usual. ``Tensor.backward`` is wrapped for that, and restored on
    exit."""
    original = Tensor.backward

    def backward(self, *args, **kwargs):
        Tensor.backward = original
        with mg.viz.record_grads():
            original(self, *args, **kwargs)
        shortcuts = len(mg.viz.find_shortcuts(self))
        written = mg.viz.render(mg.viz.draw_graph(self), path)
        drew = f"drew the graph of the first backward() ({shortcuts} gradient shortcuts)"
        print(f"{PROG}: {drew} to {written}", file=sys.stderr)

    Tensor.backward = backward
    try:
        yield
    finally:
        Tensor.backward = original
