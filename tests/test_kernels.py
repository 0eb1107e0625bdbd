"""Every kernel of the fast layer (``minigrad.fast``) against its op's reference, forward and
backward: small and big inputs (big enough for both cores), non-contiguous inputs, float32
and float64, one thread and two.

Each case runs the op three ways and compares them:
- fast: the kernel's forward and, outside create_graph, its backward;
- reference: the same call inside ``mg.fast.disabled()``;
- fast forward, reference backward: ``create_graph=True`` runs the reference's backward on
  what the kernel saved, which holds the kernel to saving what the reference reads.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import fast, ops

RNG = np.random.default_rng(0)


def normal(*shape, scale=1.0):
    return RNG.standard_normal(shape) * scale


def transposed(array):
    """The same values' transpose, as a non-contiguous view (its last two axes swapped)."""
    return np.ascontiguousarray(array.swapaxes(-1, -2)).swapaxes(-1, -2)


# Each case: (op name as registered, the call, its inputs: float arrays become inputs that
# require grad, int arrays stay constant).
CASES = {
    "linear small": ("Linear", ops.linear, [normal(4, 8), normal(3, 8), normal(3)]),
    "linear big": ("Linear", ops.linear, [normal(2, 300, 256), normal(256, 256), normal(256)]),
    "linear no bias": ("Linear", lambda x, w: ops.linear(x, w), [normal(5, 8), normal(3, 8)]),
    "linear non-contiguous": (
        "Linear",
        ops.linear,
        [transposed(normal(6, 8)), transposed(normal(3, 8)), normal(3)],
    ),
    "matmul small": ("Matmul", ops.matmul, [normal(2, 3, 4, 5), normal(2, 3, 5, 4)]),
    "matmul big": ("Matmul", ops.matmul, [normal(8, 4, 128, 64), normal(8, 4, 64, 128)]),
    "matmul broadcast": ("Matmul", ops.matmul, [normal(3, 4, 5), normal(5, 2)]),
    "matmul non-contiguous": (
        "Matmul",
        ops.matmul,
        [transposed(normal(8, 4, 64, 128)), transposed(normal(8, 4, 128, 64))],
    ),
    "softmax small": ("Softmax", lambda x: ops.softmax(x, -1), [normal(4, 5, scale=3)]),
    "softmax big": ("Softmax", lambda x: ops.softmax(x, -1), [normal(8, 64, 256, scale=3)]),
    "softmax dim 1": ("Softmax", lambda x: ops.softmax(x, 1), [normal(8, 64, 256, scale=3)]),
    "softmax big scores": ("Softmax", lambda x: ops.softmax(x, -1), [normal(8, 64, 64, scale=90)]),
    # e^x overflows even in float64: the shifted form, along the rows and along another dim
    "softmax overflowing rows": (
        "Softmax",
        lambda x: ops.softmax(x, -1),
        [normal(8, 64, 256, scale=200)],
    ),
    "softmax overflowing dim 1": (
        "Softmax",
        lambda x: ops.softmax(x, 1),
        [normal(8, 64, 256, scale=200)],
    ),
    "softmax non-contiguous": (
        "Softmax",
        lambda x: ops.softmax(x, -1),
        [transposed(normal(8, 64, 256, scale=3))],
    ),
    "log_softmax small": ("LogSoftmax", lambda x: ops.log_softmax(x, -1), [normal(4, 5)]),
    "log_softmax big": ("LogSoftmax", lambda x: ops.log_softmax(x, 1), [normal(64, 512, 8)]),
    "layer_norm small": (
        "LayerNorm",
        lambda x, w, b: ops.layer_norm(x, 8, w, b),
        [normal(4, 8, scale=3) + 1, normal(8), normal(8)],
    ),
    "layer_norm big": (
        "LayerNorm",
        lambda x, w, b: ops.layer_norm(x, 256, w, b),
        [normal(4, 256, 256, scale=3) + 1, normal(256), normal(256)],
    ),
    "layer_norm two dims": (
        "LayerNorm",
        lambda x, w, b: ops.layer_norm(x, (4, 8), w, b),
        [normal(3, 4, 8), normal(4, 8), normal(4, 8)],
    ),
    "layer_norm no affine": ("LayerNorm", lambda x: ops.layer_norm(x, 16), [normal(32, 16)]),
    "layer_norm non-contiguous": (
        "LayerNorm",
        lambda x, w, b: ops.layer_norm(x, 64, w, b),
        [transposed(normal(512, 64, 64)), normal(64), normal(64)],
    ),
    "cross_entropy small": (
        "CrossEntropy",
        ops.cross_entropy,
        [normal(6, 5, scale=3), np.array([0, 4, 2, 2, 1, 3])],
    ),
    "cross_entropy ignored rows": (
        "CrossEntropy",
        lambda x, t: ops.cross_entropy(x, t, ignore_index=-1),
        [normal(6, 5), np.array([0, -1, 2, -1, 1, 3])],
    ),
    "cross_entropy sum": (
        "CrossEntropy",
        lambda x, t: ops.cross_entropy(x, t, reduction="sum"),
        [normal(2048, 64), RNG.integers(0, 64, 2048)],
    ),
    "cross_entropy none": (
        "CrossEntropy",
        lambda x, t: ops.cross_entropy(x, t, reduction="none"),
        [normal(7, 3), RNG.integers(0, 3, 7)],
    ),
    "gelu exact small": ("Gelu", ops.gelu, [normal(4, 5, scale=3)]),
    "gelu exact big": ("Gelu", ops.gelu, [normal(512, 512, scale=3)]),
    "gelu tanh big": ("Gelu", lambda x: ops.gelu(x, "tanh"), [normal(512, 512, scale=3)]),
    "gelu non-contiguous": ("Gelu", ops.gelu, [transposed(normal(512, 512, scale=3))]),
    "add small": ("Add", ops.add, [normal(4, 5), normal(5)]),
    "add big": ("Add", ops.add, [normal(16, 128, 256), normal(16, 128, 256)]),
    "add broadcast big": ("Add", ops.add, [normal(16, 8, 64, 64), normal(64, 64)]),
    "add leading ones": ("Add", ops.add, [normal(1, 512, 1024), normal(4, 1, 1024)]),
    "add non-contiguous": (
        "Add",
        ops.add,
        [transposed(normal(8, 256, 256)), transposed(normal(8, 256, 256))],
    ),
    "add a number": ("Add", lambda x: ops.add(x, 2.5), [normal(600, 1000)]),
    "mul small": ("Mul", ops.mul, [normal(4, 5), normal(4, 5)]),
    "mul big": ("Mul", ops.mul, [normal(16, 128, 256), normal(16, 128, 256)]),
    "mul broadcast big": ("Mul", ops.mul, [normal(16, 8, 64, 64), normal(8, 1, 1)]),
    "mul a number": ("Mul", lambda x: ops.mul(x, 0.125), [normal(16, 8, 64, 64)]),
    "mul non-contiguous": ("Mul", ops.mul, [transposed(normal(8, 256, 256)), normal(256, 1)]),
    "pow 3": ("Pow", lambda x: ops.pow(x, 3.0), [normal(64, 512)]),
    "pow 4": ("Pow", lambda x: ops.pow(x, 4), [normal(4, 5, scale=3)]),
    "pow 3 non-contiguous": ("Pow", lambda x: ops.pow(x, 3), [transposed(normal(64, 128))]),
    "pow other exponent": ("Pow", lambda x: ops.pow(x, 2.5), [np.abs(normal(4, 5)) + 0.5]),
    "pow tensor exponent": ("Pow", ops.pow, [np.abs(normal(4, 5)) + 0.5, normal(4, 5)]),
    "reshape": ("Reshape", lambda x: x.reshape(4, 2, 5), [normal(8, 5)]),
    "reshape non-contiguous": (
        "Reshape",
        lambda x: x.reshape(-1, 64),
        [transposed(normal(8, 64, 32))],
    ),
    "permute": ("Permute", lambda x: x.permute(2, 0, 3, 1), [normal(2, 3, 4, 5)]),
    "permute non-contiguous": (
        "Permute",
        lambda x: x.transpose(1, 2),
        [transposed(normal(16, 64, 128))],
    ),
    "embedding small": (
        "EmbeddingBackward",
        lambda i, w: ops.embedding(i, w),
        [np.array([[1, 3, 1], [0, 3, 3]]), normal(5, 4)],
    ),
    "embedding big": (
        "EmbeddingBackward",
        lambda i, w: ops.embedding(i, w),
        [RNG.integers(0, 256, (16, 128)), normal(256, 64)],
    ),
}

# kernels that are not ops, held to their reference elsewhere
ROUTINES = {"adam_update_group": "tests/test_optim.py::test_fast_adam_equals_the_reference"}

TOLERANCE = {np.float64: 1e-10, np.float32: 2e-5}


def test_every_kernel_has_a_case():
    names = {op for op, _, _ in CASES.values()}
    for op, _ in fast._registry:
        assert op in names or op in ROUTINES, f"kernel {op} has no case in {__file__}"


def run(call, arrays, dtype, device, create_graph=False):
    """(output, gradients of the float inputs, the kernels that ran) for one call, from a
    fixed upstream gradient."""
    inputs = [
        mg.tensor(a, dtype=dtype, device=device, requires_grad=True)
        if a.dtype.kind == "f"
        else mg.tensor(a, device=device)
        for a in arrays
    ]
    out = call(*inputs)
    kernels = _kernels_in(out)
    upstream = np.random.default_rng(1).standard_normal(out.shape)
    grads = [t for t in inputs if t.requires_grad]
    found = mg.autograd.grad(
        out, grads, mg.tensor(upstream, dtype=dtype, device=device), create_graph=create_graph
    )
    return out.numpy(), [g.numpy() for g in found], kernels


def _kernels_in(out) -> set:
    """The names of the ops in the graph of ``out`` that ran a kernel."""
    from minigrad.autograd.engine import topological_order

    return {node.name for node in topological_order(out.grad_fn) if node.kernel is not None}


@pytest.fixture(params=[1, 2], ids=["one thread", "two threads"])
def threads(request):
    before = mg.get_num_threads()
    mg.set_num_threads(request.param)
    yield request.param
    mg.set_num_threads(before)


@pytest.mark.skipif(not fast.is_enabled(), reason="MINIGRAD_REFERENCE=1: no kernels to test")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_kernel_equals_its_reference(case, dtype, threads, device):
    op, call, arrays = CASES[case]
    if device == "cuda" and (op, "cuda") not in fast._registry:
        pytest.skip(f"no CUDA kernel for {op}")
    out, grads, kernels = run(call, arrays, dtype, device)
    assert op in kernels or op == "EmbeddingBackward", f"the {op} kernel did not run"
    with mg.fast.disabled():
        want_out, want_grads, none = run(call, arrays, dtype, device)
    assert none == set()
    _, reference_backward_grads, _ = run(call, arrays, dtype, device, create_graph=True)
    assert_close(out, want_out, dtype, f"{op} forward")
    for i, (got, backward_on_saved, want) in enumerate(
        zip(grads, reference_backward_grads, want_grads)
    ):
        assert got.dtype == want.dtype
        assert_close(got, want, dtype, f"{op}: gradient of input {i}")
        assert_close(backward_on_saved, want, dtype, f"{op}: reference backward, input {i}")


def assert_close(got, want, dtype, message):
    """Equal to round-off: relative to each value, and to the largest one (a sum over
    thousands of rows rounds at the scale of the largest terms, in any order of summing)."""
    tol = TOLERANCE[dtype]
    scale = float(np.abs(want[np.isfinite(want)]).max(initial=1.0))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=message)


def test_disabled_runs_no_kernel_and_restores():
    x = mg.randn(4, 8, requires_grad=True)
    expected = {"Softmax"} if fast.is_enabled() else set()
    assert _kernels_in(ops.softmax(x, -1)) == expected
    with mg.fast.disabled():
        assert not fast.is_enabled()
        assert _kernels_in(ops.layer_norm(ops.softmax(x, -1), 8)) == set()
    assert _kernels_in(ops.softmax(x, -1)) == expected


def test_a_users_function_of_the_same_name_gets_no_kernel():
    class Softmax(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    out = Softmax.apply(mg.randn(3, requires_grad=True))
    assert out.grad_fn.kernel is None
