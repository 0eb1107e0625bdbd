"""The two checks that every op test uses.

``compare_with_torch``: run a minigrad op and the same PyTorch op on the same inputs and
compare forward values, shape, dtype and the gradient of every input (as tinygrad's
``helper_test_op``). PyTorch is only the oracle here; it never enters minigrad itself.

``check_gradients``: float64 central finite differences against backward
(``mg.gradcheck``), and optionally second derivatives (``mg.gradgradcheck``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

import numpy as np

import minigrad as mg

# Input domains: "real" for ops defined everywhere, "positive" for log, sqrt and a pow base,
# "away_from_zero" to keep finite differences off the kinks of abs, relu and clamp.
DOMAINS = ("real", "positive", "away_from_zero")


def random_array(shape: tuple, rng: np.random.Generator, domain: str = "real") -> np.ndarray:
    """A float64 array of ``shape`` with values from ``domain``."""
    if domain == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if domain == "away_from_zero":
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return sign * rng.uniform(0.2, 2.0, size=shape)
    if domain == "real":
        return rng.standard_normal(shape)
    raise ValueError(f"unknown domain {domain!r}, expected one of {DOMAINS}")


def as_arrays(shapes_or_arrays: Sequence, seed: int = 0, domain: str = "real") -> list:
    """Shapes (tuples) become random float64 arrays; arrays are kept as they are."""
    rng = np.random.default_rng(seed)
    arrays = []
    for item in shapes_or_arrays:
        if isinstance(item, tuple):
            arrays.append(random_array(item, rng, domain))
        else:
            arrays.append(np.asarray(item))
    return arrays


def _is_float(array: np.ndarray) -> bool:
    return array.dtype.kind == "f"


def check_gradients(
    fn: Callable,
    *shapes_or_arrays,
    domain: str = "real",
    device: str = "cpu",
    second_order: bool = False,
    seed: int = 0,
    atol: float = 1e-5,
    rtol: float = 1e-3,
) -> None:
    """Assert that backward of ``fn(*inputs)`` matches float64 finite differences.

    Float inputs require grad; integer and bool arrays (indices, masks) are passed as
    constant tensors. With ``second_order`` the gradient is checked too (gradgradcheck).
    """
    inputs = []
    for array in as_arrays(shapes_or_arrays, seed, domain):
        if _is_float(array):
            inputs.append(mg.tensor(array, dtype=mg.float64, device=device, requires_grad=True))
        else:
            inputs.append(mg.tensor(array, device=device))
    assert mg.gradcheck(fn, inputs, atol=atol, rtol=rtol)
    if second_order:
        assert mg.gradgradcheck(fn, inputs, atol=atol, rtol=rtol)


def _outputs(result) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _torch_dtype_name(torch_tensor) -> str:
    return str(torch_tensor.dtype).replace("torch.", "")


def compare_with_torch(
    mg_fn: Callable,
    torch_fn: Callable,
    *shapes_or_arrays,
    dtype=np.float64,
    device: str = "cpu",
    domain: str = "real",
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    grad: bool = True,
) -> None:
    """Assert that ``mg_fn`` and ``torch_fn`` agree on the same inputs, forward and backward.

    Float arrays become ``dtype`` tensors that require grad (when ``grad``); integer and
    bool arrays are passed as constant tensors (indices, masks). Checked: each output's
    shape, dtype and values, then, after a backward from the same random upstream gradient,
    each input gradient's shape, dtype and values. Default tolerances: rtol 1e-6 in float64,
    1e-4 in float32.
    """
    import torch

    float64 = np.dtype(dtype) == np.float64
    rtol = rtol if rtol is not None else (1e-6 if float64 else 1e-4)
    atol = atol if atol is not None else (1e-9 if float64 else 1e-5)
    arrays = as_arrays(shapes_or_arrays, seed, domain)

    mg_inputs, torch_inputs = [], []
    for array in arrays:
        differentiable = grad and _is_float(array)
        if _is_float(array):
            array = array.astype(dtype)
        mg_inputs.append(
            mg.tensor(array, dtype=array.dtype, device=device, requires_grad=differentiable)
        )
        torch_inputs.append(torch.tensor(array, requires_grad=differentiable))

    mg_outs = _outputs(mg_fn(*mg_inputs))
    torch_outs = _outputs(torch_fn(*torch_inputs))
    assert len(mg_outs) == len(torch_outs), f"{len(mg_outs)} outputs, torch has {len(torch_outs)}"
    for i, (ours, theirs) in enumerate(zip(mg_outs, torch_outs)):
        assert ours.device == device, f"output {i} is on {ours.device}, expected {device}"
        assert ours.shape == tuple(theirs.shape), (
            f"output {i}: shape {ours.shape} != {tuple(theirs.shape)}"
        )
        assert str(ours.dtype) == _torch_dtype_name(theirs), (
            f"output {i}: dtype {ours.dtype} != torch's {theirs.dtype}"
        )
        np.testing.assert_allclose(
            ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"output {i}"
        )

    differentiable = [i for i, t in enumerate(torch_inputs) if t.requires_grad]
    if not differentiable:
        return
    rng = np.random.default_rng(seed + 1)
    mg_total = torch_total = 0.0
    for ours, theirs in zip(mg_outs, torch_outs):
        if not theirs.requires_grad:
            continue
        upstream = rng.standard_normal(ours.shape).astype(ours.dtype)
        mg_total = mg_total + (ours * mg.tensor(upstream, dtype=ours.dtype, device=device)).sum()
        torch_total = torch_total + (theirs * torch.tensor(upstream)).sum()
    if isinstance(torch_total, float):
        return  # no output depends on a differentiable input (comparisons, argmax)
    mg_total.backward()
    torch_total.backward()
    for i in differentiable:
        ours, theirs = mg_inputs[i].grad, torch_inputs[i].grad
        if theirs is None:
            assert ours is None or not ours.numpy().any(), f"input {i}: torch has no gradient"
            continue
        assert ours is not None, f"input {i}: no gradient, torch has one"
        assert ours.shape == mg_inputs[i].shape, f"input {i}: grad shape {ours.shape}"
        assert ours.dtype == mg_inputs[i].dtype, f"input {i}: grad dtype {ours.dtype}"
        assert ours.device == device, f"input {i}: grad on {ours.device}"
        np.testing.assert_allclose(
            ours.numpy(), theirs.numpy(), rtol=rtol, atol=atol, err_msg=f"gradient of input {i}"
        )


def check_study_tables(result, name: str, folder, whole_rows: bool = True) -> None:
    """A study's result is well formed and ``result.write(folder)`` writes its two tables:
    study_NAME.md (a header and a line per row and per check) and study_NAME.json (the same
    columns, rows, checks and verdict). ``whole_rows``: every row has every column (the
    residual studies leave cells empty where a value does not apply)."""
    assert result.name == name and result.claim and result.criterion
    assert result.rows and result.checks and result.seconds > 0
    assert not whole_rows or all(set(result.columns) <= set(row) for row in result.rows)
    assert result.passed == all(c.passed for c in result.checks if c.required)
    numbers = [v for row in result.rows for v in row.values() if isinstance(v, float)]
    assert numbers and all(math.isfinite(v) for v in numbers)
    written = {path.name for path in result.write(folder)}
    assert written == {f"study_{name}.md", f"study_{name}.json"}
    table = json.loads((folder / f"study_{name}.json").read_text())
    assert table["columns"] == result.columns and len(table["rows"]) == len(result.rows)
    assert table["passed"] == result.passed
    assert [c["name"] for c in table["checks"]] == [c.name for c in result.checks]
    markdown = (folder / f"study_{name}.md").read_text()
    header = "| " + " | ".join(c.replace("|", "\\|") for c in result.columns) + " |"
    assert header in markdown and markdown.count("\n|") >= len(result.rows) + len(result.checks)
