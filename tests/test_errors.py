"""Bad input raises a clear exception in the user's terms (the op, the shapes, the devices,
the dtypes), never a bare NumPy traceback. Each case checks the type and the message.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import ops
from minigrad.errors import DeviceError, OutOfRangeError, ShapeError


def raises(kind, pattern):
    """pytest.raises with a message pattern written as plain text (no regex escapes)."""
    return pytest.raises(kind, match=re.escape(pattern))


# -- shapes that do not broadcast or multiply --------------------------------------------------

BROADCASTING_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
}


@pytest.mark.parametrize("name", BROADCASTING_OPS)
def test_shapes_that_do_not_broadcast_name_op_and_shapes(name, device):
    a, b = mg.randn(2, 3, device=device), mg.randn(4, device=device)
    with raises(ShapeError, f"{name}: shapes (2, 3) and (4,) do not broadcast"):
        BROADCASTING_OPS[name](a, b)


def test_shape_error_is_a_value_error():
    with pytest.raises(ValueError, match="do not broadcast"):
        mg.randn(2, 3) + mg.randn(2)


def test_where_and_comparisons_that_do_not_broadcast(device):
    a, b = mg.randn(2, 3, device=device), mg.randn(4, device=device)
    with raises(ShapeError, "where: shapes (2, 3) and (2, 3) and (4,) do not broadcast"):
        mg.where(a > 0, a, b)
    with raises(ShapeError, "comparison: shapes (2, 3) and (4,) do not broadcast"):
        a < b
    with raises(ShapeError, "masked_fill: mask of shape (4,) does not broadcast to (2, 3)"):
        a.masked_fill(b > 0, 0.0)


@pytest.mark.parametrize(
    "shape_a, shape_b, message",
    [
        ((2, 3), (4, 5), "matmul: cannot multiply shapes (2, 3) and (4, 5)"),
        ((3,), (4,), "matmul: cannot multiply shapes (1, 3) and (4, 1)"),
        ((2, 2, 3), (3, 3, 2), "matmul: shapes (2, 2, 3) and (3, 3, 2) do not broadcast"),
        ((), (3,), "matmul: both operands need at least 1 dim, got () and (3,)"),
    ],
    ids=["2d", "1d", "batch_dims", "0d"],
)
def test_matmul_shapes_that_do_not_multiply(shape_a, shape_b, message, device):
    a, b = mg.randn(*shape_a, device=device), mg.randn(*shape_b, device=device)
    with raises(ShapeError, message):
        a @ b


def test_linear_with_wrong_feature_count(device):
    x, w = mg.randn(2, 3, device=device), mg.randn(5, 4, device=device)
    with raises(ShapeError, "linear: input of shape (2, 3) has 3 features but the weight of"):
        ops.linear(x, w)


@pytest.mark.parametrize(
    "fn, kind, message",
    [
        (lambda x: x.reshape(4, 2), ShapeError, "reshape: invalid input shapes (2, 3)"),
        (lambda x: mg.cat([x, x.T]), ShapeError, "cat: shapes (2, 3), (3, 2) must match"),
        (lambda x: mg.stack([x, x.T]), ShapeError, "stack: all tensors must have the same"),
        (lambda x: x.split([1, 3], 1), ShapeError, "split: sizes [1, 3] do not add up to 3"),
        (lambda x: x.split(0), ValueError, "split: split_size must be a positive integer"),
        (lambda x: x.chunk(0), ValueError, "chunk: chunks must be a positive integer"),
        (lambda x: x.permute(0, 0), ShapeError, "permute: (0, 0) is not a permutation"),
        (lambda x: x.expand(3, 3), ShapeError, "expand: cannot expand a tensor of shape (2, 3) to"),
        (lambda x: ops.layer_norm(x, 4), ShapeError, "does not end in normalized_shape (4,)"),
        (lambda x: x.clamp(), ValueError, "clamp: at least one of min and max"),
        (lambda x: ops.gelu(x, "erf"), ValueError, "gelu: approximate must be 'none' or"),
        (lambda x: ops.dropout(x, 1.5), ValueError, "dropout: p must be between 0 and 1"),
        (lambda x: x.T.T.item(), ValueError, "only a one-element tensor has an item"),
        (lambda x: bool(x), RuntimeError, "truth value of a tensor of shape (2, 3) is ambig"),
        (lambda x: x.reshape(1, 2, 3).T, ValueError, ".T needs a 2-D tensor, got shape (1, 2, 3)"),
    ],
    ids=[
        "reshape", "cat", "stack", "split_sizes", "split_zero", "chunk_zero", "permute", "expand",
        "layer_norm", "clamp", "gelu", "dropout", "item", "bool", "T",
    ],
)  # fmt: skip
def test_other_shape_and_argument_errors(fn, kind, message, device):
    with raises(kind, message):
        fn(mg.randn(2, 3, device=device))


def test_cross_entropy_bad_target_shape_dtype_and_reduction(device):
    logits = mg.randn(4, 3, device=device)
    with raises(ShapeError, "target of shape (3,) does not fit logits of shape (4, 3)"):
        ops.cross_entropy(logits, mg.tensor([0, 1, 2], device=device))
    with raises(TypeError, "cross_entropy: target must hold class indices (int64), got float32"):
        ops.cross_entropy(logits, mg.zeros(4, device=device))
    with raises(ValueError, "cross_entropy: reduction must be mean, sum or none"):
        ops.cross_entropy(logits, mg.tensor([0, 1, 2, 0], device=device), reduction="avg")
    with raises(ValueError, "mse_loss: reduction must be mean, sum or none"):  # (was: mean)
        ops.mse_loss(logits, logits, reduction="avg")


# -- index and dim out of range ----------------------------------------------------------------


@pytest.mark.parametrize(
    "index, message",
    [
        (5, "index out of range: [5] on a tensor of shape (2, 3)"),
        (-3, "index out of range: [-3] on a tensor of shape (2, 3)"),
        ((slice(None), 7), "on a tensor of shape (2, 3) (index 7 is out of bounds for axis 1"),
        ([0, 3], "index out of range: [[0, 3]] on a tensor of shape (2, 3)"),
        (np.array([0, 2]), "index out of range: [[0, 2]] on a tensor of shape (2, 3)"),
    ],
    ids=["int", "negative_int", "slice_and_int", "list", "array"],
)
def test_getitem_out_of_range(index, message, device):
    x = mg.randn(2, 3, device=device, requires_grad=True)
    with raises(OutOfRangeError, message):
        x[index]


def test_getitem_int_tensor_out_of_range_is_an_index_error(device):
    x = mg.randn(2, 3, device=device)
    with pytest.raises(IndexError, match=re.escape("index out of range: [[1, 2]]")):
        x[mg.tensor([1, 2], device=device)]


@pytest.mark.parametrize("bad", [4, -1])
def test_embedding_index_out_of_range(bad, device):
    weight = mg.randn(4, 2, device=device, requires_grad=True)
    with raises(OutOfRangeError, f"embedding: index {bad} is out of range for 4 embeddings"):
        ops.embedding(mg.tensor([[0, bad]], device=device), weight)


@pytest.mark.parametrize("bad", [3, -5])
def test_cross_entropy_target_out_of_range(bad, device):
    logits = mg.randn(2, 3, device=device, requires_grad=True)
    with raises(OutOfRangeError, f"cross_entropy: target {bad} is out of range for 3 classes"):
        ops.cross_entropy(logits, mg.tensor([0, bad], device=device))


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda x: x.sum(dim=2), "dim 2 is out of range for a tensor with 2 dims"),
        (lambda x: x.amax(dim=-3), "dim -3 is out of range for a tensor with 2 dims"),
        (lambda x: ops.softmax(x, 2), "dim 2 is out of range"),
        (lambda x: x.transpose(0, 2), "transpose: dim 2 is out of range"),
        (lambda x: x.permute(0, 2), "permute: dim 2 is out of range"),
        (lambda x: x.squeeze(2), "squeeze: dim 2 is out of range"),
        (lambda x: x.unsqueeze(3), "unsqueeze: dim 3 is out of range"),
        (lambda x: x.flatten(2), "flatten: dim 2 is out of range"),
        (lambda x: mg.cat([x, x], 2), "cat: dim 2 is out of range"),
        (lambda x: mg.stack([x, x], 3), "stack: dim 3 is out of range"),
        (lambda x: x.split(1, -3), "split: dim -3 is out of range"),
    ],
    ids=[
        "sum", "amax", "softmax", "transpose", "permute", "squeeze", "unsqueeze", "flatten",
        "cat", "stack", "split",
    ],
)  # fmt: skip
def test_dim_out_of_range(fn, message, device):
    with raises(OutOfRangeError, message):
        fn(mg.randn(2, 3, device=device))


# -- backward misuse -----------------------------------------------------------------------------


def test_backward_on_non_scalar_without_gradient(device):
    y = mg.randn(2, 3, device=device, requires_grad=True) * 2.0
    with raises(RuntimeError, "grad can be implicitly created only for a scalar output"):
        y.backward()
    with pytest.raises(RuntimeError, match=re.escape("the output has shape (2, 3)")):
        y.backward()


@pytest.mark.parametrize("shape", [(3,), (3, 2), (1, 2, 3)])
def test_backward_with_gradient_of_wrong_shape(shape, device):
    y = mg.randn(2, 3, device=device, requires_grad=True) * 2.0
    with raises(RuntimeError, f"gradient has shape {shape} but the output has shape (2, 3)"):
        y.backward(mg.ones(*shape, device=device))


def test_backward_on_tensor_without_graph(device):
    with raises(RuntimeError, "backward: the tensor does not require grad"):
        mg.randn(3, device=device).sum().backward()


def test_custom_backward_returning_wrong_shape_is_caught(device):
    class Broken(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad.sum()  # should keep x's shape

    x = mg.randn(2, 3, device=device, requires_grad=True)
    with raises(RuntimeError, "Broken.backward returned a gradient of shape () for input 0"):
        Broken.apply(x).sum().backward()


@pytest.mark.parametrize(
    "make",
    [
        lambda d: mg.tensor([1, 2], device=d, requires_grad=True),
        lambda d: mg.arange(3, device=d).requires_grad_(),
        lambda d: mg.tensor([True], device=d, requires_grad=True),
    ],
    ids=["tensor_int64", "arange_requires_grad_", "bool"],
)
def test_requires_grad_on_integer_tensor(make, device):
    with pytest.raises(RuntimeError, match="only floating point tensors can require gradients"):
        make(device)


def test_requires_grad_error_names_dtype_and_shape(device):
    with raises(RuntimeError, "this tensor has dtype int64 (shape (2,))"):
        mg.tensor([1, 2], device=device, requires_grad=True)


def test_in_place_write_to_leaf_that_requires_grad(device):
    x = mg.zeros(3, device=device, requires_grad=True)
    with raises(RuntimeError, "in-place assignment to a leaf tensor that requires grad"):
        x[0] = 1.0
    with mg.no_grad():
        x[0] = 1.0
    assert x.tolist() == [1.0, 0.0, 0.0]


# -- devices -------------------------------------------------------------------------------------


class FakeGpuArray:
    """Stands in for a CuPy array: not a NumPy array, so minigrad sees it on "cuda"."""

    def __init__(self, shape):
        self.shape, self.dtype, self.ndim = shape, np.dtype(np.float32), len(shape)


@pytest.mark.parametrize("op", ["add", "mul", "matmul"])
def test_mixed_devices_name_both_devices_and_shapes(op):
    cpu = mg.randn(2, 3)
    gpu = mg.Tensor._make(FakeGpuArray((2, 3)))
    expected = f"{op}: expected all tensors on the same device, got (2, 3) on cpu "
    with raises(DeviceError, expected + "and (2, 3) on cuda"):
        getattr(ops, op)(cpu, gpu)


def test_mixed_devices_on_a_real_gpu(device):
    if device == "cpu":
        pytest.skip("needs a second device: runs in the cuda case")
    with raises(DeviceError, "(2, 3) on cpu and (2, 3) on cuda"):
        mg.randn(2, 3) + mg.randn(2, 3, device=device)
    with raises(DeviceError, "on cuda"):
        mg.randn(2, 3, device=device) @ mg.randn(3, 2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: mg.zeros(2, device="cuda"),
        lambda: mg.tensor([1.0], device="cuda"),
        lambda: mg.randn(2).to("cuda"),
        lambda: mg.randn(2).cuda(),
    ],
    ids=["zeros", "tensor", "to", "cuda"],
)
def test_cuda_without_gpu_says_how_to_install(make):
    if mg.cuda.is_available():
        pytest.skip("a GPU is available here")
    with raises(DeviceError, 'pip install "minigrad[gpu]"'):
        make()
    with pytest.raises(RuntimeError, match="device 'cuda' is not available"):
        make()


def test_unknown_device():
    with raises(ValueError, "unknown device 'tpu': expected 'cpu' or 'cuda'"):
        mg.zeros(2, device="tpu")


def test_embedding_of_no_indices_is_empty_even_with_no_rows():
    # nothing to look up is never out of range, as in PyTorch
    weight = mg.zeros(0, 4, requires_grad=True)
    out = ops.embedding(mg.tensor(np.zeros((2, 0), np.int64)), weight)
    assert out.shape == (2, 0, 4)


def test_a_linear_layer_with_no_inputs_works_as_in_torch():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch warns too: a zero-element init is a no-op)
        layer = mg.nn.Linear(0, 3)
    x = mg.randn(2, 0, requires_grad=True)
    y = layer(x)
    y.sum().backward()
    assert y.shape == (2, 3) and layer.weight.grad.shape == (3, 0)
    assert layer.bias.grad.tolist() == [2.0, 2.0, 2.0] and x.grad.shape == (2, 0)


@pytest.mark.parametrize("other", ["str", None, ["a", "b"]])
def test_a_tensor_and_a_string_is_a_type_error(other):
    with pytest.raises(TypeError, match="unsupported operand"):
        mg.ones(2) + other
    with pytest.raises(TypeError, match="unsupported operand"):
        other * mg.ones(2)
