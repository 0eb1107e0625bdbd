"""Making tensors: from data, filled with a value, or random (seeded by ``mg.manual_seed``, or
drawn from the ``generator=`` given), with PyTorch's signatures: sizes as ``zeros(2, 3)``,
``zeros((2, 3))`` or ``zeros(size=(2, 3))``, and ``dtype=``, ``device=``, ``requires_grad=``.

Floating data becomes float32 unless ``dtype`` says otherwise, even NumPy's float64 arrays
(NumPy's float64 default would otherwise make tensors float64 by accident); integer data
becomes int64.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend, rng
from minigrad.errors import ShapeError
from minigrad.tensor import Tensor


def get_default_dtype():
    """The dtype of floating tensors made without ``dtype=``: float32."""
    return np.dtype(np.float32)


def _default_dtype(array, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    kind = array.dtype.kind
    if kind == "f":
        return np.dtype(np.float32)
    if kind in "iu":
        return np.dtype(np.int64)
    if kind == "b":
        return np.dtype(np.bool_)
    raise TypeError(f"tensor: cannot make a tensor from data of dtype {array.dtype}")


def _device(device) -> str:
    return "cpu" if device is None else backend.check_device(device)


def _plain(data):
    """``data`` with every Tensor in it (a list of 0-d tensors, say) replaced by its values."""
    if isinstance(data, Tensor):
        return data.numpy()
    if isinstance(data, (list, tuple)):
        return [_plain(item) for item in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (list, number, array or Tensor, or a list
    of tensors)."""
    device = _device(device)
    if isinstance(data, Tensor):
        data = data.array
    xp = backend.xp_for(device)
    if not backend.is_numpy(data) and device == "cpu" and hasattr(data, "get"):
        data = data.get()
    try:
        array = xp.array(data)
    except (TypeError, ValueError):
        array = None
    if array is None or array.dtype == object:
        array = xp.array(_plain(data))
    array = array.astype(_default_dtype(array, dtype), copy=False)
    return Tensor(array, requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, without a copy where it already is one (a Tensor, or a NumPy
    array on the CPU, whose dtype it keeps, as in PyTorch) of that dtype and device."""
    if isinstance(data, Tensor):
        same_dtype = dtype is None or data.dtype == np.dtype(dtype)
        if same_dtype and (device is None or data.device == _device(device)):
            return data
        return data.detach().to(_device(device or data.device), dtype or data.dtype)
    if isinstance(data, np.ndarray) and _device(device) == "cpu":
        return Tensor(data if dtype is None else data.astype(dtype, copy=False))
    return tensor(data, dtype=dtype, device=device)


def _size(shape, size, name: str) -> tuple:
    """The size a creation function was given, as ``f(2, 3)``, ``f((2, 3))`` or
    ``f(size=(2, 3))``, checked as PyTorch checks it."""
    if size is not None:
        if shape:
            raise TypeError(f"{name}(): got the size both as arguments and as size=")
        shape = (size,)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for dim in shape:
        if isinstance(dim, Tensor) and dim.ndim == 0 and dim.dtype.kind in "iu":
            continue
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(
                f"{name}(): the size must be a tuple of ints, but it holds a "
                f"{type(dim).__name__} ({dim!r})"
            )
    shape = tuple(int(dim) for dim in shape)
    if any(dim < 0 for dim in shape):
        raise RuntimeError(f"{name}(): a dimension size must be non-negative, got the size {shape}")
    return shape


def _dtype(dtype, name: str) -> np.dtype:
    """``dtype`` (None: float32) as a NumPy dtype, or PyTorch's TypeError."""
    try:
        return np.dtype(dtype or np.float32)
    except TypeError:
        message = f"{name}(): dtype must be a dtype such as mg.float32, not {dtype!r}"
        raise TypeError(message) from None


def _number(value, what: str, name: str):
    """A Python number (or a one-element tensor's value), or PyTorch's TypeError."""
    if isinstance(value, Tensor) and value.numel() == 1:
        return value.item()
    if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError(f"{name}(): {what} must be a number, not {type(value).__name__}")
    return value


def _filled(fill, shape, dtype, device, requires_grad, name="full"):
    fill = _number(fill, "the fill value", name)
    array = backend.xp_for(_device(device)).full(shape, fill, dtype=_dtype(dtype, name))
    return Tensor(array, requires_grad=requires_grad)


def zeros(*shape, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(0, _size(shape, size, "zeros"), dtype, device, requires_grad)


def ones(*shape, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(1, _size(shape, size, "ones"), dtype, device, requires_grad)


def empty(*shape, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """As PyTorch's, but filled with zeros (PyTorch leaves whatever was in the memory)."""
    return _filled(0, _size(shape, size, "empty"), dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    if isinstance(size, (int, np.integer)):
        size = (size,)
    if dtype is None and isinstance(fill_value, bool):
        dtype = np.bool_
    elif dtype is None and isinstance(fill_value, int):
        dtype = np.int64
    return _filled(fill_value, _size((size,), None, "full"), dtype, device, requires_grad)


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(0, t.shape, dtype or t.dtype, device or t.device, requires_grad)


def ones_like(t: Tensor, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(1, t.shape, dtype or t.dtype, device or t.device, requires_grad)


def empty_like(t: Tensor, dtype=None, device=None, requires_grad=False) -> Tensor:
    """As PyTorch's, but filled with zeros."""
    return _filled(0, t.shape, dtype or t.dtype, device or t.device, requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(fill_value, t.shape, dtype or t.dtype, device or t.device, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    """arange(n) or arange(start, end, step); int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("arange: the step must be nonzero")
    integer = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.int64 if integer else np.float32)
    array = backend.xp_for(_device(device)).arange(start, end, step).astype(dtype)
    return Tensor(array, requires_grad=requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    start, end = _number(start, "start", "linspace"), _number(end, "end", "linspace")
    (steps,) = _size((_integer(steps, "steps", "linspace"),), None, "linspace")
    array = backend.xp_for(_device(device)).linspace(start, end, steps)
    return Tensor(array.astype(_dtype(dtype, "linspace")), requires_grad=requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    n, m = _size((n, n if m is None else m), None, "eye")
    array = backend.xp_for(_device(device)).eye(n, m, dtype=_dtype(dtype, "eye"))
    return Tensor(array, requires_grad=requires_grad)


def _legacy(dtype, name: str):
    """PyTorch's legacy constructors: ``LongTensor([1, 2])`` (data) or ``LongTensor(2, 3)``
    (a size: zeros here)."""

    def make(*args, device=None) -> Tensor:
        if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            data = args[0]
            if isinstance(data, Tensor) and data.dtype != np.dtype(dtype):
                raise TypeError(
                    f"{name}: expected a tensor of dtype {np.dtype(dtype)}, got {data.dtype}"
                )
            if np.isscalar(data):
                raise TypeError(f"{name}(): data must be a sequence (got {type(data).__name__})")
            return tensor(data, dtype=dtype, device=device)
        return zeros(_size(args, None, name), dtype=dtype, device=device)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"A {np.dtype(dtype)} tensor from data, or of zeros from a size."
    return make


FloatTensor = _legacy(np.float32, "FloatTensor")
DoubleTensor = _legacy(np.float64, "DoubleTensor")
HalfTensor = _legacy(np.float16, "HalfTensor")
LongTensor = _legacy(np.int64, "LongTensor")
IntTensor = _legacy(np.int32, "IntTensor")
BoolTensor = _legacy(np.bool_, "BoolTensor")
ByteTensor = _legacy(np.uint8, "ByteTensor")


# -- random ---------------------------------------------------------------------------------


def randn(
    *shape, size=None, generator=None, dtype=None, device=None, requires_grad=False
) -> Tensor:
    """Standard normal samples."""
    shape, device = _size(shape, size, "randn"), _device(device)
    draws = rng.generator(device, generator).standard_normal(shape, dtype=np.float64)
    return Tensor(draws.astype(dtype or np.float32), requires_grad=requires_grad)


def rand(*shape, size=None, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform samples from [0, 1). On the CPU PyTorch's numbers for the same seed: one raw
    32-bit word per value, its low 24 bits times 2^-24 (float64: a 64-bit word, 53 bits)."""
    shape, device = _size(shape, size, "rand"), _device(device)
    dtype = np.dtype(dtype or np.float32)
    engine = rng.generator(device, generator)
    if device != "cpu":
        return Tensor(engine.random(shape).astype(dtype), requires_grad=requires_grad)
    count, bits = int(np.prod(shape)), 53 if dtype == np.float64 else 24
    words = rng.words64(engine, count) if bits == 53 else rng.words32(engine, count)
    draws = (words & np.uint64(2**bits - 1)) * 2.0**-bits
    return Tensor(draws.astype(dtype).reshape(shape), requires_grad=requires_grad)


def _integer(value, what: str, name: str) -> int:
    if isinstance(value, Tensor) and value.numel() == 1 and value.dtype.kind in "iu":
        return int(value.item())
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}(): {what} must be an int, not {type(value).__name__}")
    return int(value)


def randint(*args, generator=None, dtype=None, device=None, requires_grad=False, **bounds):
    """Integers drawn uniformly from [low, high), as PyTorch takes them:
    ``randint(high, size)``, ``randint(low, high, size)``, or by keywords ``low=`` (default
    0), ``high=``, ``size=`` (a tuple). int64 unless ``dtype`` says otherwise."""
    unknown = set(bounds) - {"low", "high", "size"}
    if unknown:
        raise TypeError(f"randint() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if len(args) > 3:
        raise TypeError(f"randint() takes at most 3 positional arguments ({len(args)} given)")
    names = {1: ["high"], 2: ["high", "size"], 3: ["low", "high", "size"]}.get(len(args), [])
    if len(args) == 2 and "size" in bounds:  # randint(low, high, size=...)
        names = ["low", "high"]
    for name, value in zip(names, args):
        if name in bounds:
            raise TypeError(f"randint() got multiple values for argument {name!r}")
        bounds[name] = value
    if "high" not in bounds or "size" not in bounds:
        missing = "high" if "high" not in bounds else "size"
        raise TypeError(f"randint() missing the argument {missing!r}")
    low = _integer(bounds.get("low", 0), "low", "randint")
    high = _integer(bounds["high"], "high", "randint")
    size = bounds["size"]
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): size must be a tuple of ints, not {type(size).__name__}")
    size = _size((size,), None, "randint")
    if low >= high:
        raise RuntimeError(f"randint(): low must be less than high, got low={low} >= high={high}")
    device = _device(device)
    draws = _integers(rng.generator(device, generator), device, low, high, size)
    array = backend.xp_for(device).asarray(draws).astype(dtype or np.int64)
    return Tensor(array, requires_grad=requires_grad)


def _integers(engine, device: str, low: int, high: int, size: tuple):
    """Integers from [low, high); on the CPU PyTorch's for the same seed: low + (word mod
    (high - low)), one raw 32-bit word per value (a 64-bit one when the range needs it)."""
    if device != "cpu":
        return engine.integers(low, high, size=size)
    count, span = int(np.prod(size)), high - low
    words = rng.words32(engine, count) if span < 2**32 else rng.words64(engine, count)
    return (words % np.uint64(span)).astype(np.int64).reshape(size) + low


def randperm(n, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The integers 0 .. n-1 in a random order (int64 unless ``dtype`` says otherwise)."""
    n = _integer(n, "n", "randperm")
    if n < 0:
        raise RuntimeError(f"randperm(): n must be non-negative, got {n}")
    device = _device(device)
    engine = rng.generator(device, generator)
    order = _shuffled(engine, n) if device == "cpu" else engine.permutation(n)
    array = backend.xp_for(device).asarray(order).astype(dtype or np.int64)
    return Tensor(array, requires_grad=requires_grad)


def _shuffled(engine, n: int) -> np.ndarray:
    """0 .. n-1 shuffled as PyTorch shuffles on the CPU (so the same seed gives the same
    order): Fisher-Yates, position i swapped with i + (word_i mod (n - i))."""
    order = np.arange(n, dtype=np.int64)
    words = rng.words32(engine, max(n - 1, 0))
    for i, word in enumerate(words.tolist()):
        j = i + word % (n - i)
        order[i], order[j] = order[j], order[i]
    return order


def normal(mean, std=1.0, size=None, generator=None, dtype=None, device=None) -> Tensor:
    """Samples of N(mean, std^2): ``normal(mean_tensor, std_tensor)`` elementwise (either may
    be a number), or ``normal(0.0, 1.0, size)`` for two numbers."""
    tensors = [value for value in (mean, std) if isinstance(value, Tensor)]
    if not tensors and size is None:
        raise TypeError("normal(): with a number for both mean and std, give the size too")
    if tensors:
        device = tensors[0].device
        dtype = dtype or tensors[0].dtype
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
    else:
        device, shape = _device(device), _size((size,), None, "normal")
    xp = backend.xp_for(device)
    mean_array, std_array = (v.array if isinstance(v, Tensor) else v for v in (mean, std))
    if bool(xp.any(xp.asarray(std_array) < 0)):
        raise RuntimeError("normal(): std must be >= 0")
    noise = rng.generator(device, generator).standard_normal(shape, dtype=np.float64)
    return Tensor((mean_array + std_array * noise).astype(dtype or np.float32))


def bernoulli(input: Tensor, generator=None) -> Tensor:  # noqa: A002
    """1 with probability input[i], else 0, for each entry; input's shape and dtype."""
    probs = input.array
    xp = backend.array_module(probs)
    if not bool(xp.all((probs >= 0) & (probs <= 1))):
        raise RuntimeError("bernoulli(): every probability must lie in [0, 1]")
    draws = rng.generator(input.device, generator).random(input.shape) < probs
    return Tensor(draws.astype(input.dtype))


def multinomial(
    input: Tensor,  # noqa: A002
    num_samples: int,
    replacement: bool = False,
    generator=None,
) -> Tensor:
    """Indices drawn from the categories of each row of ``input``, category j with
    probability input[j] / sum(input): weights need not sum to 1, only be >= 0.

    input: (C,) or (N, C) floats -> int64 (num_samples,) or (N, num_samples), on input's
    device. Without replacement a category is drawn at most once per row, so num_samples
    may not exceed C. Draws from ``generator``, or minigrad's (``mg.manual_seed`` repeats them).
    """
    weights = _checked_weights(input, num_samples, replacement)
    rows = weights.reshape(-1, weights.shape[-1])  # (N, C): a 1-D input is one row
    generator = rng.generator(input.device, generator)
    if replacement:
        indices = _draw_with_replacement(rows, num_samples, generator)
    else:
        indices = _draw_without_replacement(rows, num_samples, generator)
    return Tensor(indices.reshape(weights.shape[:-1] + (num_samples,)))


def _draw_with_replacement(rows, num_samples: int, generator):
    """Inverse CDF: with cdf the running sums of a row scaled to end at exactly 1, a uniform
    u in [0, 1) falls in category j where cdf[j-1] <= u < cdf[j], an interval as wide as
    category j's probability (zero-width for a zero weight, which is never drawn)."""
    xp = backend.array_module(rows)
    cdf = xp.cumsum(rows, axis=-1)
    cdf /= cdf[:, -1:]  # (x / x is exactly 1: the last interval ends at 1 > u)
    uniforms = generator.random((rows.shape[0], num_samples))
    picks = [xp.searchsorted(cdf[i], uniforms[i], side="right") for i in range(rows.shape[0])]
    return xp.stack(picks).astype(np.int64)


def _draw_without_replacement(rows, num_samples: int, generator):
    """Draw, remove, renormalize, repeat, all at once (the exponential race, as PyTorch
    does): with E_j ~ Exp(1), w_j / E_j is largest for category j with probability
    w_j / sum(w), and the order of the largest keys is that of drawing one at a time."""
    xp = backend.array_module(rows)
    exponentials = -xp.log1p(-generator.random(rows.shape))  # -log(1 - u), u in [0, 1)
    keys = rows / exponentials  # (E = 0 has probability 2^-53: an infinite key, drawn first)
    return xp.argsort(-keys, axis=-1)[:, :num_samples].astype(np.int64)


def _checked_weights(input: Tensor, num_samples: int, replacement: bool):  # noqa: A002
    """input's array as float64, after PyTorch's checks, each error naming what was wrong."""
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-D or 2-D, got shape {input.shape}")
    if input.dtype.kind != "f":
        raise TypeError(f"multinomial: input must be floating point, got {input.dtype}")
    categories = input.shape[-1]
    if num_samples <= 0:
        raise ValueError(f"multinomial: cannot draw num_samples={num_samples} <= 0 samples")
    if not replacement and num_samples > categories:
        raise ValueError(
            f"multinomial: cannot draw {num_samples} samples without replacement from "
            f"{categories} categories (input of shape {input.shape}); pass replacement=True"
        )
    weights = input.array.astype(np.float64)
    xp = backend.array_module(weights)
    if not bool(xp.isfinite(weights).all()) or bool((weights < 0).any()):
        raise ValueError("multinomial: the weights contain inf, nan or a value < 0")
    if bool((weights.sum(axis=-1) <= 0).any()):
        raise ValueError("multinomial: a row of weights sums to 0 (nothing to draw from)")
    drawable = (weights > 0).sum(axis=-1)
    if not replacement and bool((drawable < num_samples).any()):
        raise ValueError(
            f"multinomial: cannot draw {num_samples} samples without replacement from a row "
            f"with only {int(drawable.min())} categories of weight > 0"
        )
    return weights


def randn_like(t: Tensor, dtype=None, device=None, requires_grad=False) -> Tensor:
    return randn(
        t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad
    )


def rand_like(t: Tensor, dtype=None, device=None, requires_grad=False) -> Tensor:
    return rand(
        t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad
    )


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor that shares memory with ``array`` and keeps its dtype."""
    return Tensor(np.asarray(array))
