"""DataParallel: a forward and a backward on two cores, each core on half of the batch.

The examples of a batch go through the model independently of each other, so the batch can
be cut in two along its first axis and each half run through the same model on its own
thread: each half makes its own graph, and the outputs are joined again. Backward is the
chain rule through that join: dL/d(outputs) is cut the same way, each half's graph takes its
part, both graphs are walked at the same time, and each parameter's ``.grad`` collects the
sum of the two halves' contributions,

    dL/dθ = dL/dY_1 · dY_1/dθ + dL/dY_2 · dY_2/dθ        (Y_i: the outputs of half i)

which is dL/dθ of the whole batch. Two threads of Python compute at once because NumPy lets
go of the GIL inside its loops and products.

    parallel = nn.DataParallel(model)
    logits, _ = parallel(x)            # as model(x): x (B, T), logits (B, T, vocab)
    loss = next_token_loss(logits, y)  # (models.gpt) the loss of the whole batch
    loss.backward()                    # then both halves' graphs, on both threads

Without it, minigrad shares each big op between two threads (``minigrad.fast``): one
hand-off per product or softmax, 84 in a training step of benchmarks/train_step.py's
``small`` GPT, while the many short ops (LayerNorm's passes, the residual additions) run on
one core. Here the work changes hands twice a step and every op runs on both cores, but the
two threads take turns at the GIL for each op's Python. So it pays for big ops only: on 2
cores, a training step of 2048 tokens of width 128 (``small``) took 0.85-0.96 of the plain
step's time (eight runs of benchmarks/train_step.py --parallel), ``medium`` (2048 tokens of
width 256) 0.90-1.10, and ``tiny`` (8 x 16 tokens of width 32) about three times as long.

Outputs are gathered as PyTorch's DataParallel gathers them: tensors are concatenated along
``dim``, and a 0-dim output (a loss) becomes a vector of the two halves' values. The mean of
that vector is the whole batch's loss only when every example weighs the same in it (a loss
that skips positions, ``ignore_index``, weighs each half by the positions it counts); so, as
above, compute the loss from the gathered outputs. The graph shows one ``DataParallelCall``
node in place of the model's; its backward runs the two halves' graphs.

It splits NumPy batches of two or more, when minigrad has two threads (``set_num_threads``)
and every tensor input has the same size along ``dim`` (other arguments go to both halves as
they are). Otherwise (on the GPU, whose kernels queue on one stream anyway, on one thread, or
for a tensor that is not batched, such as a shared mask) it calls the model on the whole
batch. What differs from calling the model: a module that keeps something from its last
forward (``MultiHeadAttention.attn_weights``) keeps one half's, and dropout draws from a
generator of each half's own (``minigrad.rng``), so a run repeats, but not the numbers of the
same run without DataParallel.
"""

from __future__ import annotations

import threading

from minigrad import ops, rng
from minigrad.autograd.engine import walk
from minigrad.autograd.function import Context, Function, record
from minigrad.autograd.grad_mode import modes
from minigrad.backend import array_module, is_numpy
from minigrad.fast.threads import get_num_threads
from minigrad.nn.module import Module, _record_call
from minigrad.tensor import Tensor


class DataParallel(Module):
    """``DataParallel(module, dim=0)(*inputs)``: ``module(*inputs)`` computed as two halves
    of the batch (the inputs' axis ``dim``) on two threads; see the module docstring."""

    def __init__(self, module: Module, dim: int = 0):
        super().__init__()
        self.module = module
        self.dim = dim

    def forward(self, *inputs):
        tensors = [item for item in inputs if isinstance(item, Tensor)]
        if not self._splits(tensors):
            return self.module(*inputs)
        return _forward_in_halves(self.module, inputs, tensors, self.dim)

    def _splits(self, tensors) -> bool:
        if not tensors or get_num_threads() < 2:
            return False
        if any(not is_numpy(t.array) or t.ndim <= self.dim for t in tensors):
            return False
        sizes = {t.shape[self.dim] for t in tensors}
        return len(sizes) == 1 and sizes.pop() >= 2

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _Halves:
    """What one call keeps for its backward: per half, its input leaves and its outputs."""

    def __init__(self, inputs, outputs, sizes, dim):
        self.inputs, self.outputs, self.sizes, self.dim = inputs, outputs, sizes, dim


def _forward_in_halves(module, inputs, tensors, dim):
    batch = tensors[0].shape[dim]
    sizes = ((batch + 1) // 2, batch // 2)  # as chunk(2): the first half takes the odd one
    grad_enabled = modes.grad_enabled
    halves, leaves = ([], []), ([], [])  # per half: its inputs, and the tensors among them
    for item in inputs:
        if not isinstance(item, Tensor):
            halves[0].append(item)
            halves[1].append(item)
            continue
        needs_grad = grad_enabled and item.requires_grad
        for half, half_leaves, part in zip(halves, leaves, _split(item.array, sizes, dim)):
            leaf = Tensor._make(part, needs_grad)  # a leaf: its grad is this half's
            half.append(leaf)
            half_leaves.append(leaf)

    results = [None, None]
    generators = rng.HalvesGenerators()

    def run_half(index):
        with generators.half(index):
            results[index] = module(*halves[index])

    _on_both_threads(run_half)

    outputs, rebuild = _flatten(results[0])
    second_outputs, _ = _flatten(results[1])
    arrays = [_gather(a, b, dim) for a, b in zip(outputs, second_outputs)]
    differentiable = [
        a is not None and (a.requires_grad or b.requires_grad)
        for a, b in zip(outputs, second_outputs)
    ]
    if not (grad_enabled and True in differentiable):
        return rebuild([None if a is None else Tensor._make(a) for a in arrays])

    # one node for the whole call: its inputs are the call's tensors and the parameters that
    # the halves' graphs reach, so that backward finds it; its backward runs those graphs
    parameters = [p for p in module.parameters() if p.requires_grad]
    ctx = Context()
    kept = [(a, b) for (a, b), keep in zip(zip(outputs, second_outputs), differentiable) if keep]
    ctx.save_for_backward(
        _Halves(
            inputs=leaves,
            outputs=(tuple(a for a, _ in kept), tuple(b for _, b in kept)),
            sizes=sizes,
            dim=dim,
        )
    )
    tensor_outputs, index = [], 0
    for array, keep in zip(arrays, differentiable):
        if array is None:
            tensor_outputs.append(None)
        elif keep:
            tensor_outputs.append(Tensor._make(array, True, ctx, index))
            index += 1
        else:
            tensor_outputs.append(Tensor._make(array))
    grad_outputs = [t for t, keep in zip(tensor_outputs, differentiable) if keep]
    needs_grad = tuple([t.requires_grad for t in tensors] + [True] * len(parameters))
    record(ctx, DataParallelCall, (*tensors, *parameters), needs_grad, grad_outputs)
    ctx.output_specs = tuple((t.shape, t.dtype, array_module(t.array)) for t in grad_outputs)
    # the node is the model's call as well (as if the model had made it): minigrad.viz names
    # the parameters after the model, also once a temporary DataParallel wrapper is gone
    _record_call(module, grad_outputs, ctx.seq, ctx.seq + 1)
    return rebuild(tensor_outputs)


class DataParallelCall(Function):
    """The graph node of one DataParallel call. Its backward seeds each half's graph with
    its share of dL/d(outputs), walks both graphs at once, and returns the gradients of the
    call's inputs (the halves' joined) and of the parameters (the halves' summed)."""

    @staticmethod
    def backward(ctx, *grads):
        if modes.grad_enabled:
            raise RuntimeError(
                "DataParallel: backward with create_graph=True is not supported (each half's "
                "inputs enter its graph as leaves, so second derivatives would miss the "
                "path through them); call the module itself for that"
            )
        (halves,) = ctx.saved_arrays
        sizes, dim = halves.sizes, halves.dim
        seeds = ([], [])
        for first_half, grad in zip(halves.outputs[0], grads):
            if first_half.ndim == 0:  # the vector of the halves' 0-dim outputs
                parts = (grad[0], grad[1])
            else:  # each half's rows of dL/d(output)
                parts = _split(grad, sizes, dim)
            for index in (0, 1):
                seeds[index].append(parts[index])
        retain, leaf_grads = modes.retain_graph, [{}, {}]

        def backward_half(index):
            roots = [(o, s) for o, s in zip(halves.outputs[index], seeds[index]) if o.requires_grad]
            if roots:
                leaf_grads[index] = walk(*zip(*roots), retain, False)

        _on_both_threads(backward_half)

        def grad_of(leaf, index):
            found = leaf_grads[index].get(id(leaf))
            return None if found is None else found[1]

        input_grads = []  # each input's: its two halves' joined
        for first, second in zip(*halves.inputs):
            if not first.requires_grad:
                input_grads.append(None)
                continue
            parts = [grad_of(leaf, i) for i, leaf in enumerate((first, second))]
            parts = [p if p is not None else leaf.zeros_like_detached() for p, leaf in
                     zip(parts, (first, second))]  # fmt: skip
            input_grads.append(ops.cat(parts, dim=dim))
        param_grads = []  # each parameter's: the sum of the two halves' (dL/dθ above)
        for param in ctx.inputs[len(input_grads) :]:
            parts = [g for g in (grad_of(param, 0), grad_of(param, 1)) if g is not None]
            param_grads.append(None if not parts else parts[0] if len(parts) == 1 else
                               parts[0] + parts[1])  # fmt: skip
        return (*input_grads, *param_grads)


def _on_both_threads(run_half) -> None:
    """run_half(0) and run_half(1) on two threads at the same time, each with this thread's
    grad mode."""
    names = ("grad_enabled", "anomaly", "retain_graph", "node_observer")
    flags = {name: getattr(modes, name) for name in names}
    errors = []

    def as_caller(index):
        for name, value in flags.items():
            setattr(modes, name, value)
        try:
            run_half(index)
        except BaseException as error:
            errors.append(error)

    second = threading.Thread(target=as_caller, args=(1,), name="minigrad-data-parallel")
    second.start()
    try:
        as_caller(0)
    finally:
        second.join()
    if errors:
        raise errors[0]


def _split(value, sizes, dim):
    """The two halves of an array or a Tensor along ``dim`` (views, or slicing ops)."""
    before = (slice(None),) * dim
    return value[(*before, slice(0, sizes[0]))], value[(*before, slice(sizes[0], None))]


def _gather(first, second, dim):
    """One output of the whole batch from its two halves (Tensors): concatenated along
    ``dim``, or for 0-dim outputs the vector of the two."""
    if first is None and second is None:
        return None
    if first is None or second is None or first.ndim != second.ndim:
        raise TypeError(
            "DataParallel: the two halves of the batch gave outputs of different kinds "
            f"({_describe(first)} and {_describe(second)})"
        )
    xp = array_module(first.array)
    if first.ndim == 0:
        return xp.stack((first.array, second.array))
    return xp.concatenate((first.array, second.array), axis=dim)


def _describe(value) -> str:
    return "None" if value is None else f"a tensor of shape {tuple(value.shape)}"


def _flatten(output):
    """(list of Tensors or None, function that puts such a list back into output's shape)."""
    if isinstance(output, Tensor) or output is None:
        return [output], lambda items: items[0]
    if isinstance(output, (tuple, list)) and all(
        item is None or isinstance(item, Tensor) for item in output
    ):
        kind = type(output)
        return list(output), lambda items: kind(items)
    raise TypeError(
        "DataParallel: the module must return a tensor or a tuple of tensors (or None), "
        f"got {type(output).__name__}"
    )
