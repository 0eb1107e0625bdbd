"""Fused CUDA kernels (CuPy): on the GPU each array call is one kernel launch, 10-20 us of
Python and driver time however small the array, so an op written as a dozen calls costs a
dozen launches. These kernels do the arithmetic of such an op in one launch: LayerNorm's
normalize-scale-shift and its input gradient, LayerNorm's variance (one reduction), GELU and
its derivative, and the AdamW update. The reference ops run on CuPy arrays as they are; the
GPU cases of ``tests/test_kernels.py`` hold these to them.
"""

from __future__ import annotations

import math

from minigrad import fast
from minigrad.ops.activation import GELU_TANH_C, INV_SQRT_2PI, SQRT_2_OVER_PI
from minigrad.tensor import Tensor

_compiled: dict = {}


def _kernel(name: str, kind: str, *definition):
    """A CuPy ElementwiseKernel or ReductionKernel (``kind``), compiled on first use."""
    kernel = _compiled.get(name)
    if kernel is None:
        import cupy

        kernel = _compiled[name] = getattr(cupy, kind)(*definition, "minigrad_" + name)
    return kernel


def _elementwise(name: str, inputs: str, outputs: str, body: str):
    return _kernel(name, "ElementwiseKernel", inputs, outputs, body)


@fast.register("LayerNorm", "cuda")
class LayerNormKernel:
    @staticmethod
    def forward(ctx, x, weight, bias, axes, eps):
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(x, weight)
        n = math.prod(x.shape[a] for a in axes)
        mean = x.sum(axis=axes, keepdims=True)
        mean *= 1.0 / n
        rstd = _kernel(
            "centered_sum_of_squares",
            "ReductionKernel",
            "T x, T mean",
            "T y",
            "(x - mean) * (x - mean)",
            "a + b",
            "y = a",
            "0",
        )(x, mean, axis=axes, keepdims=True)
        rstd *= 1.0 / n  # sigma^2
        rstd += eps
        rstd **= -0.5  # 1 / sqrt(sigma^2 + eps)
        one = x.dtype.type(1)
        xhat, y = _elementwise(
            "layer_norm_output",
            "T x, T mean, T rstd, T weight, T bias",
            "T xhat, T y",
            "xhat = (x - mean) * rstd; y = xhat * weight + bias;",
        )(x, mean, rstd, one if weight is None else weight, 0 * one if bias is None else bias)
        ctx.save_for_kernel(xhat, rstd)
        return y

    @staticmethod
    def backward(ctx, grad):
        (_, weight), (xhat, rstd) = ctx.saved_arrays, ctx.kernel_saved
        grad, axes = grad.array, ctx.axes
        rows = tuple(range(grad.ndim - len(axes)))
        grad_xhat = grad if weight is None else grad * weight
        grad_x = _elementwise(
            "layer_norm_input_grad",
            "T gx, T xhat, T rstd, T mean_gx, T mean_gx_xhat",
            "T grad_x",
            "grad_x = rstd * (gx - mean_gx - xhat * mean_gx_xhat);",
        )(
            grad_xhat,
            xhat,
            rstd,
            grad_xhat.mean(axis=axes, keepdims=True),
            (grad_xhat * xhat).mean(axis=axes, keepdims=True),
        )
        _, need_w, need_b = ctx.needs_input_grad
        grad_w = Tensor._make((grad * xhat).sum(axis=rows)) if need_w else None
        grad_b = Tensor._make(grad.sum(axis=rows)) if need_b else None
        return Tensor._make(grad_x), grad_w, grad_b


@fast.register("Gelu", "cuda")
class GeluKernel:
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        if approximate == "tanh":
            body = f"""
            T u = (T){SQRT_2_OVER_PI!r} * x * ((T)1 + (T){GELU_TANH_C!r} * x * x);
            s = (T)1 / ((T)1 + exp((T)-2 * u));   // (1 + tanh u) / 2
            y = x * s;"""
        else:
            body = f"s = (T)0.5 * ((T)1 + erf(x * (T){1 / math.sqrt(2.0)!r})); y = x * s;"
        y, kept = _elementwise("gelu_" + approximate, "T x", "T y, T s", body)(x)
        ctx.save_for_kernel(kept)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,), (kept,) = ctx.saved_arrays, ctx.kernel_saved
        if ctx.approximate == "tanh":
            body = f"""
            T du2 = (T){2 * SQRT_2_OVER_PI!r} * ((T)1 + (T){3 * GELU_TANH_C!r} * x * x);
            slope = g * (s + x * s * ((T)1 - s) * du2);"""
        else:
            body = f"slope = g * (s + x * exp((T)-0.5 * x * x) * (T){INV_SQRT_2PI!r});"
        kernel = _elementwise("gelu_grad_" + ctx.approximate, "T x, T s, T g", "T slope", body)
        return Tensor._make(kernel(x, kept, grad.array)), None


@fast.register("adam_update_group", "cuda")
def update_group_on_gpu(optimizer, params: list, group: dict) -> list:
    """``optim.adam.adam_update`` as one kernel per parameter (p, m and v in place)."""
    import cupy

    kernel = _elementwise(
        "adam_update",
        "T g, float64 decay, float64 wd, bool decoupled, float64 one_minus_beta1, "
        "float64 beta2, float64 one_minus_beta2, float64 bias_correction2_sqrt, "
        "float64 eps, float64 step_size",
        "T p, T m, T v",
        """
        T grad = g;
        if (wd != 0) {
            if (decoupled) p = p * (T)decay;        // p = p (1 - lr wd)
            else grad = grad + (T)wd * p;           // g = g + wd p
        }
        m = m + (grad - m) * (T)one_minus_beta1;  // m = m + (1 - beta1) (g - m)
        v = v * (T)beta2 + grad * grad * (T)one_minus_beta2;
        T denom = sqrt(v) / (T)bias_correction2_sqrt + (T)eps;
        p = p - m / denom * (T)step_size;
        """,
    )
    for param in params:
        state = optimizer.state.setdefault(param, {})
        if not state:
            state["step"] = 0
            state["exp_avg"] = cupy.zeros_like(param.array)
            state["exp_avg_sq"] = cupy.zeros_like(param.array)
        state["step"] += 1
        c = optimizer._coefficients(group, state["step"])
        kernel(
            param.grad.array,
            1 - c.lr * c.weight_decay,
            c.weight_decay,
            c.decoupled,
            1 - c.beta1,
            c.beta2,
            1 - c.beta2,
            c.bias_correction2_sqrt,
            c.eps,
            c.step_size,
            param.array,
            state["exp_avg"],
            state["exp_avg_sq"],
        )
    return []
