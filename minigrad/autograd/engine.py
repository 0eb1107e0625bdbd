"""The backward pass: walk the graph from the output to the leaves, applying the chain rule.

    1. Seed dL/dL = 1 (or the given ``gradient``) at the output.
    2. Take the node of the latest op that has received a gradient. Nodes are numbered in
       the order their ops ran (``ctx.seq``), and every op that used a node's outputs ran
       after it, so by now all of them have handed it their gradients.
    3. Hand the gradients of its outputs to its ``backward``, which returns one gradient
       per input; add each into the input's pending gradient. Repeat from 2.
    4. Leaves (tensors made by the user) add what reached them into their ``.grad``.

Every gradient that arrives at a tensor is summed: a tensor used twice gets both
contributions (the multivariate chain rule).
"""

from __future__ import annotations

import heapq

from minigrad import errors
from minigrad.autograd.grad_mode import modes
from minigrad.backend import array_module


def topological_order(*roots) -> list:
    """The nodes reachable from the roots in the order backward takes them: the latest op
    first, so each node before the nodes that made its inputs."""
    found, stack = set(roots), list(roots)
    while stack:
        for arg in stack.pop().inputs:
            parent = getattr(arg, "grad_fn", None)
            if parent is not None and parent not in found:
                found.add(parent)
                stack.append(parent)
    return sorted(found, key=lambda node: -node.seq)


def backward(output, gradient=None, retain_graph=False, create_graph=False) -> None:
    """Compute d output / d leaf for every leaf that requires grad; see Tensor.backward.
    Outside create_graph ``.grad`` gets memory of its own, as PyTorch's AccumulateGrad:
    ``w.grad.zero_()`` must not change another tensor's gradient that shares the array (Add
    hands both inputs the same one)."""
    seed = _seed_gradient(output, gradient)
    leaf_grads = walk((output,), (seed,), retain_graph or create_graph, create_graph)
    for leaf, grad in leaf_grads.values():  # leaf.grad += grad, after the leaf's hooks
        grad = _run_hooks(leaf, grad) if leaf._hooks else grad
        grad = grad if create_graph else Tensor._make(grad.array.copy())
        leaf.grad = grad if leaf.grad is None else leaf.grad + grad


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False):
    """d outputs / d inputs as a tuple, without touching any ``.grad`` (as torch.autograd.grad):
    several outputs add up, each seeded with its grad_output; None for an input that they do
    not depend on. ``inputs`` may be non-leaf tensors."""
    as_tuple = lambda x: tuple(x) if isinstance(x, (tuple, list)) else (x,)  # noqa: E731
    outputs, inputs = as_tuple(outputs), as_tuple(inputs)
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad: {len(grad_outputs)} grad_outputs for {len(outputs)} outputs")
    seeds = [_seed_gradient(out, g) for out, g in zip(outputs, grad_outputs)]
    found = {}  # id(input) -> dL/d input: a hook on each non-leaf input catches its gradient
    catch = lambda key: lambda g: found.__setitem__(key, g)  # noqa: E731
    handles = [x.register_hook(catch(id(x))) for x in inputs if x.grad_fn is not None]
    try:
        retain = create_graph if retain_graph is None else retain_graph
        leaf_grads = walk(outputs, seeds, retain, create_graph)
    finally:
        for handle in handles:
            handle.remove()
    found.update({key: leaf_grad for key, (_, leaf_grad) in leaf_grads.items()})
    return tuple(found.get(id(x)) for x in inputs)


def _seed_gradient(output, gradient):
    """dL/d output to start from: 1 for a scalar, else ``gradient`` (of output's shape)."""
    if not output.requires_grad:
        raise errors.backward_of_no_graph()
    if gradient is None and output.array.size != 1:
        raise errors.backward_of_non_scalar(output.shape)
    xp = array_module(output.array)
    if gradient is None:
        return Tensor._make(xp.ones_like(output.array))
    if not isinstance(gradient, Tensor):  # (an array or a list)
        gradient = Tensor._make(xp.asarray(gradient, output.dtype))
    if gradient.shape != output.shape:
        raise errors.seed_of_wrong_shape(gradient.shape, output.shape)
    return gradient.to(output.dtype)  # as PyTorch: the seed takes the output's dtype


def walk(outputs, seeds, retain_graph: bool, create_graph: bool) -> dict:
    """The walk itself, from one or more outputs, each seeded with its dL/d output. Returns
    {id(leaf): (leaf, dL/d leaf)} for the leaves it reached; ``backward`` adds them to .grad."""
    anomaly = modes.anomaly  # (then each node's result is checked, not each op inside it)
    modes_before = modes.grad_enabled, modes.retain_graph, anomaly
    modes.grad_enabled, modes.retain_graph, modes.anomaly = create_graph, retain_graph, False
    try:
        pending, leaf_grads = {}, {}  # node -> {output index: dL/d(that output)}; leaves
        latest = []  # the nodes in pending as a heap of (-seq, node): the latest op on top
        for output, seed in zip(outputs, seeds):
            _pass_on(output, seed, pending, leaf_grads, latest)
        while latest:
            node = heapq.heappop(latest)[1]
            output_grads, inputs = pending.pop(node), node.inputs
            input_grads = _backward_node(node, inputs, output_grads, anomaly)
            for arg, needed, grad in zip(inputs, node.needs_input_grad, input_grads):
                if needed and grad is not None:
                    if grad.array.shape != arg.array.shape or grad.array.dtype != arg.array.dtype:
                        grad = _as_input_grad(node, arg, grad)
                    _pass_on(arg, grad, pending, leaf_grads, latest)
            if not retain_graph:
                node.free_saved()
        return leaf_grads
    finally:
        modes.grad_enabled, modes.retain_graph, modes.anomaly = modes_before  # (as ``with``)


def _pass_on(tensor, grad, pending, leaf_grads, latest) -> None:
    """Add ``grad`` (dL/d tensor) to what ``tensor`` has received so far."""
    node, index = tensor.grad_fn, tensor._output_index
    if node is None:  # a leaf
        before = leaf_grads.get(id(tensor))
        leaf_grads[id(tensor)] = (tensor, grad if before is None else _sum(before[1], grad))
        return
    if node not in pending:  # its first gradient
        pending[node] = {}
        heapq.heappush(latest, (-node.seq, node))
    before = pending[node].get(index)
    pending[node][index] = grad if before is None else _sum(before, grad)


def _sum(a, b):  # a + b of two gradients: outside create_graph no graph node to record
    return a + b if modes.grad_enabled else Tensor._make(a.array + b.array)


def _backward_node(node, inputs, output_grads, anomaly: bool) -> tuple:
    """The node's backward, given dL/d(each output): its kernel's outside create_graph, else
    its own; returns one gradient (or None) per input."""
    tensor = node.outputs[0]() if len(node.outputs) == 1 else None  # (its grad: index 0)
    if tensor is not None and not (tensor._hooks or tensor._retains_grad):
        grads = (output_grads[0],)  # (one output, and nothing to do to its gradient)
    else:
        grads = [_gradient_of_output(node, i, output_grads) for i in range(len(node.outputs))]
    kernel = node.kernel
    use_kernel = kernel is not None and kernel.backward is not None and not modes.grad_enabled
    input_grads = (kernel if use_kernel else node.function).backward(node, *grads)
    if type(input_grads) is not tuple:
        input_grads = (input_grads,)
    if len(input_grads) < len(inputs):
        raise errors.too_few_gradients(node, input_grads)
    if anomaly:
        arrays = [getattr(g, "array", None) for g in input_grads]
        errors.check_finite(node.name, "backward", arrays, inputs)
    if modes.node_observer is not None:  # (viz.record_grads: each edge's gradient norm)
        modes.node_observer(node, input_grads)
    return input_grads


def _gradient_of_output(node, index, output_grads):
    """dL/d(output ``index`` of node), after its hooks and its retained .grad; zeros for an
    output that got no gradient (one of several, dropped unused)."""
    grad, tensor = output_grads.get(index), node.outputs[index]()
    if grad is None:
        shape, dtype, xp = node.output_specs[index]
        return Tensor._make(xp.zeros(shape, dtype))
    if tensor is not None and (tensor._hooks or tensor._retains_grad):
        grad = _run_hooks(tensor, grad)
        if tensor._retains_grad:
            detached = grad if modes.grad_enabled else grad.detach()
            tensor.grad = detached if tensor.grad is None else tensor.grad + detached
    return grad


def _run_hooks(tensor, grad):
    for hook in tuple((tensor._hooks or {}).values()):
        result = hook(grad)
        grad = grad if result is None else result
    return grad


def _as_input_grad(node, arg, grad):
    """A gradient of another shape or dtype than its input ``arg``: an error for the shape,
    else cast to arg's dtype (float32 * float64 gives a float64 gradient; x keeps float32)."""
    if grad.array.shape != arg.array.shape:
        raise errors.gradient_of_wrong_shape(node, arg, grad)
    return grad.to(arg.dtype)


from minigrad.tensor import Tensor  # noqa: E402  (tensor.py imports this module first)
