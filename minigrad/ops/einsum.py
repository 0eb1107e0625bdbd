"""``einsum``: sums of products named by subscripts, ``mg.einsum("bij,bjk->bik", a, b)``.

The equation is first rewritten with explicit subscripts everywhere: ``...`` becomes letters
of its own, and an implicit output (no ``->``) becomes, as in PyTorch, the ellipsis dims and
then the letters used exactly once, in alphabetical order.

The backward of y = einsum(s_1, ..., s_n -> out) for operand k is again an einsum: the
gradient g (subscripts ``out``) times every other operand, summed over whatever is not a
subscript of operand k::

    dL/dx_k = einsum(out, s_1, ..., (not s_k), ..., s_n -> s_k)

Two cases do not fit an einsum's output, and are built around it: a letter that occurs
only in s_k (summed inside x_k alone: its gradient is the same at every index, a broadcast),
and a letter repeated in s_k ("ii", a diagonal: the gradient lands on that diagonal only,
zeros elsewhere).
"""

from __future__ import annotations

import string

from minigrad.autograd.function import Function
from minigrad.ops._helpers import xp_of
from minigrad.ops.shape import broadcast_to, reshape
from minigrad.tensor import Tensor


class Einsum(Function):
    # y = einsum(inputs -> output);  dL/dx_k = einsum(output, inputs without k -> inputs[k])
    @staticmethod
    def forward(ctx, *arrays, inputs, output):
        ctx.subscripts, ctx.output_subscripts = inputs, output
        ctx.save_for_backward(*arrays)
        equation = ",".join(inputs) + "->" + output
        return xp_of(arrays[0]).einsum(equation, *arrays, optimize=len(arrays) > 1)

    @staticmethod
    def backward(ctx, grad):
        operands = ctx.saved_tensors
        grads = []
        for k, subscripts in enumerate(ctx.subscripts):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
                continue
            others = [j for j in range(len(operands)) if j != k]
            terms = [ctx.output_subscripts] + [ctx.subscripts[j] for j in others]
            tensors = [grad] + [operands[j] for j in others]
            grads.append(_gradient_of(subscripts, operands[k].shape, terms, tensors))
        return tuple(grads)


def _gradient_of(subscripts: str, shape: tuple, terms: list, tensors: list):
    """The einsum of ``terms`` into the letters of ``subscripts`` that they hold, then laid
    out in the shape of the operand: size 1 for a missing or repeated letter, summed where the
    operand was broadcast (size 1), broadcast back to its shape, kept on its diagonals."""
    present = set("".join(terms))
    kept = "".join(dict.fromkeys(c for c in subscripts if c in present))  # first occurrences
    partial = Einsum.apply(*tensors, inputs=tuple(terms), output=kept)

    sizes, broadcast_dims, seen = [], [], set()
    for axis, letter in enumerate(subscripts):
        size = partial.shape[kept.index(letter)] if letter in kept and letter not in seen else 1
        seen.add(letter)
        sizes.append(size)
        if size != 1 and shape[axis] == 1:
            broadcast_dims.append(axis)
    laid_out = reshape(partial, tuple(sizes))
    if broadcast_dims:
        laid_out = laid_out.sum(dim=tuple(broadcast_dims), keepdim=True)
    laid_out = broadcast_to(laid_out, shape)
    diagonal = _diagonal_mask(subscripts, shape, xp_of(partial.array), partial.dtype)
    return laid_out if diagonal is None else laid_out * diagonal


def _diagonal_mask(subscripts: str, shape: tuple, xp, dtype):
    """1 where every repeated letter has equal indices, 0 elsewhere (None if none repeats)."""
    mask = None
    for axis, letter in enumerate(subscripts):
        first = subscripts.index(letter)
        if first == axis:
            continue
        n = shape[axis]
        eye_shape = [n if a in (first, axis) else 1 for a in range(len(shape))]
        eye = xp.eye(n, dtype=dtype).reshape(eye_shape)
        mask = eye if mask is None else mask * eye
    return None if mask is None else Tensor._make(mask)


# -- parsing the equation ------------------------------------------------------------------


def einsum(equation: str, *operands):
    """Sum of products over the subscripts of ``equation`` ("ij,jk->ik" is a matmul,
    "bhqd,bhkd->bhqk" attention scores, "ii->" a trace, "...ij->...ji" a transpose); the
    operands may also come as one list. Differentiable in every operand."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for position, operand in enumerate(operands):
        if not isinstance(operand, Tensor):
            raise TypeError(
                f"einsum(): expected Tensor as element {position} of the operands, but got "
                f"{type(operand).__name__}"
            )
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    dtypes = {t.dtype for t in operands}
    if len(dtypes) > 1:
        raise RuntimeError(
            f"einsum(): expected all operands of one dtype, got {sorted(map(str, dtypes))}"
        )
    inputs, output = _explicit(equation, operands)
    _check_sizes(inputs, operands)
    return Einsum.apply(*operands, inputs=inputs, output=output)


def _explicit(equation: str, operands) -> tuple:
    """The equation's input subscripts (one string per operand) and output subscripts, with
    every ``...`` replaced by letters of its own."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    if "->" in rhs:
        raise RuntimeError(f"einsum(): more than one '->' in the equation {equation!r}")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    for char in lhs + rhs:
        if char not in string.ascii_letters and char not in ".,":
            raise RuntimeError(
                f"einsum(): invalid subscript {char!r} in the equation {equation!r}, "
                "subscripts must be in [a-zA-Z]"
            )

    ellipsis_dims = [
        _ellipsis_dims(term, t.ndim, k) for k, (term, t) in enumerate(zip(terms, operands))
    ]
    unused = [c for c in string.ascii_letters if c not in equation]
    n_ellipsis = max(ellipsis_dims)
    if n_ellipsis > len(unused):
        raise RuntimeError("einsum(): too many dimensions for the 52 subscript letters")
    ellipsis = "".join(unused[:n_ellipsis])
    inputs = tuple(
        term.replace("...", ellipsis[n_ellipsis - n :] if n else "")
        for term, n in zip(terms, ellipsis_dims)
    )
    if not arrow:
        letters = "".join(terms).replace(".", "")
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        return inputs, ellipsis + "".join(once)
    if rhs.count("...") > 1 or rhs.replace("...", "").count(".") or "," in rhs:
        raise RuntimeError(f"einsum(): invalid output subscripts {rhs!r}")
    output = rhs.replace("...", ellipsis)
    for letter in rhs.replace("...", ""):
        if rhs.count(letter) > 1:
            raise RuntimeError(
                f"einsum(): output subscript {letter} appears more than once in the output"
            )
        if letter not in lhs:
            raise RuntimeError(
                f"einsum(): output subscript {letter} does not appear in the equation for any "
                "input operand"
            )
    return inputs, output


def _ellipsis_dims(term: str, ndim: int, k: int) -> int:
    """How many dims of operand k its ``...`` stands for (0 without one)."""
    if term.count("...") > 1 or term.replace("...", "").count("."):
        raise RuntimeError(f"einsum(): invalid subscripts {term!r} for operand {k}")
    letters = len(term.replace("...", ""))
    if "..." not in term:
        if letters != ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({letters}) does not match "
                f"the number of dimensions ({ndim}) for operand {k} and no ellipsis was given"
            )
        return 0
    if letters > ndim:
        raise RuntimeError(
            f"einsum(): the number of subscripts in the equation ({letters}) is more than the "
            f"number of dimensions ({ndim}) for operand {k}"
        )
    return ndim - letters


def _check_sizes(inputs, operands) -> None:
    """Each letter has one size, or size 1 (which broadcasts), as in PyTorch."""
    sizes = {}
    for k, (subscripts, operand) in enumerate(zip(inputs, operands)):
        own = {}
        for letter, size in zip(subscripts, operand.shape):
            if letter in own and own[letter] != size:
                raise RuntimeError(
                    f"einsum(): subscript {letter} is repeated for operand {k} but the sizes "
                    f"don't match, {own[letter]} != {size}"
                )
            own[letter] = size
            seen = sizes.get(letter, 1)
            if size != 1 and seen != 1 and size != seen:
                raise RuntimeError(
                    f"einsum(): subscript {letter} has size {size} for operand {k} which does "
                    f"not broadcast with previously seen size {seen}"
                )
            sizes[letter] = size if size != 1 else seen
