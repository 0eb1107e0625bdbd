"""Batch normalization (Ioffe and Szegedy 2015): each channel c normalized over the batch,

    y = gamma_c * (x - mu_c) / sqrt(sigma_c^2 + eps) + beta_c

In training mu_c and sigma_c^2 are the batch's mean and (biased) variance over every
dim but the channel dim 1, and the running estimates move towards them:

    running_mean = (1 - momentum) * running_mean + momentum * mu_c
    running_var  = (1 - momentum) * running_var  + momentum * sigma_c^2 * n / (n - 1)

(the unbiased variance, n values per channel); ``momentum=None`` takes the plain average of
all batches so far. In eval mode the running estimates stand in for the batch's.
"""

from __future__ import annotations

import numpy as np

from minigrad import ops
from minigrad.errors import ShapeError
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share; they differ in the input dims they take."""

    input_dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        dtype=None,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dtype = np.dtype(dtype or np.float32)
        if affine:
            self.weight = Parameter(np.ones(num_features, dtype=dtype))  # gamma
            self.bias = Parameter(np.zeros(num_features, dtype=dtype))  # beta
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype=dtype)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype=dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.array[...] = 0
            self.running_var.array[...] = 1
            self.num_batches_tracked.array[...] = 0

    def forward(self, x: Tensor) -> Tensor:
        self._check_input(x)
        # the dims averaged over: all but the channel dim 1
        dims = (0,) + tuple(range(2, x.ndim))
        # the per-channel vectors (C,) shaped to broadcast against x: (C,), (C, 1), (C, 1, 1)
        channel_shape = (self.num_features,) + (1,) * (x.ndim - 2)
        use_batch_stats = self.training or self.running_mean is None
        if use_batch_stats:
            mean = ops.mean(x, dim=dims, keepdim=True)  # mu_c
            var = ops.var(x, dim=dims, unbiased=False, keepdim=True)  # sigma_c^2 (biased)
            if self.training and self.running_mean is not None:
                self._update_running_stats(mean.array, var.array, x.numel() // self.num_features)
        else:
            mean = Tensor._make(self.running_mean.array.reshape(channel_shape))
            var = Tensor._make(self.running_var.array.reshape(channel_shape))
        # x_hat = (x - mu) / sqrt(sigma^2 + eps)
        normalized = (x - mean) / ops.sqrt(var + self.eps)
        if self.weight is None:
            return normalized
        # y = gamma * x_hat + beta
        return normalized * self.weight.reshape(channel_shape) + self.bias.reshape(channel_shape)

    def _update_running_stats(self, mean, var, count: int) -> None:
        """Move the running estimates towards the batch's (outside the graph)."""
        self.num_batches_tracked.array[...] += 1
        if self.momentum is None:  # the plain average of every batch so far
            factor = 1.0 / float(self.num_batches_tracked.array)
        else:
            factor = self.momentum
        unbiased = var * (count / (count - 1)) if count > 1 else var
        running_mean, running_var = self.running_mean.array, self.running_var.array
        running_mean[...] = (1 - factor) * running_mean + factor * mean.reshape(-1)
        running_var[...] = (1 - factor) * running_var + factor * unbiased.reshape(-1)

    def _check_input(self, x: Tensor) -> None:
        name = type(self).__name__
        if x.ndim not in self.input_dims:
            dims = " or ".join(f"{d}D" for d in self.input_dims)
            raise ValueError(f"{name}: expected {dims} input (got {x.ndim}D input)")
        if x.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}: expected {self.num_features} channels in dim 1, got input of "
                f"shape {x.shape}"
            )
        per_channel = x.numel() // self.num_features
        if self.training and per_channel <= 1:
            raise ValueError(
                f"{name}: expected more than 1 value per channel when training, got input "
                f"of shape {x.shape}"
            )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) inputs, per channel C."""

    input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) images, per channel C."""

    input_dims = (4,)
