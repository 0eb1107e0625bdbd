"""The backward pass: walk the graph from the output to the leaves, applying the chain rule.

    1. Order the nodes so that each comes after every node that uses its outputs
       (a depth-first search with an explicit stack: no recursion, so a 100,000-node chain
       is fine under Python's default recursion limit).
    2. Seed dL/dL = 1 (or the given ``gradient``) at the output.
    3. For each node in that order, hand the gradients of its outputs to its ``backward``,
       which returns one gradient per input; add each into the input's pending gradient.
    4. Leaves (tensors made by the user) add what reached them into their ``.grad``.

Every gradient that arrives at a tensor is summed: a tensor used twice gets both
contributions (the multivariate chain rule).
"""

from __future__ import annotations

from minigrad import errors
from minigrad.autograd.grad_mode import modes
from minigrad.backend import array_module


def topological_order(*roots) -> list:
    """Nodes reachable from the roots, each before the nodes that produced its inputs."""
    order, visited = [], set()
    stack = [(node, False) for node in reversed(roots)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif node not in visited:
            visited.add(node)
            stack.append((node, True))
            for arg in node.inputs:
                parent = getattr(arg, "grad_fn", None)
                if parent is not None and parent not in visited:
                    stack.append((parent, False))
    order.reverse()
    return order


def backward(output, gradient=None, retain_graph=False, create_graph=False) -> None:
    """Compute d output / d leaf for every leaf that requires grad; see Tensor.backward."""
    seed = _seed_gradient(output, gradient)
    leaf_grads = walk((output,), (seed,), retain_graph or create_graph, create_graph)
    for leaf, grad in leaf_grads.values():
        accumulate_into_leaf(leaf, grad, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False):
    """d outputs / d inputs as a tuple, without touching any ``.grad`` (as torch.autograd.grad);
    None for an input the output does not depend on. ``inputs`` may be non-leaf tensors."""
    if isinstance(outputs, (tuple, list)):  # (one output, or a one-element list of it)
        if len(outputs) != 1:
            raise ValueError(f"grad: expected one output, got {len(outputs)}; sum them first")
        outputs = outputs[0]
    if isinstance(grad_outputs, (tuple, list)):
        (grad_outputs,) = grad_outputs
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    seed = _seed_gradient(outputs, grad_outputs)
    found = {}  # id(input) -> dL/d input: a hook on each non-leaf input catches its gradient
    catch = lambda key: lambda g: found.__setitem__(key, g)  # noqa: E731
    handles = [x.register_hook(catch(id(x))) for x in inputs if x.grad_fn is not None]
    try:
        retain = create_graph if retain_graph is None else retain_graph
        leaf_grads = walk((outputs,), (seed,), retain, create_graph)
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
    """The walk itself, from one or more outputs at once, each seeded with its dL/d output.
    Returns {id(leaf): (leaf, dL/d leaf)} for the leaves it reached, and leaves their
    ``.grad`` alone (``accumulate_into_leaf`` adds them)."""
    grad_was_enabled, retained_before = modes.grad_enabled, modes.retain_graph
    modes.grad_enabled = create_graph  # as ``with set_grad_enabled(create_graph)``
    modes.retain_graph = retain_graph
    try:
        pending, leaf_grads = {}, {}  # node -> {output index: dL/d(that output)}; leaves
        for output, seed in zip(outputs, seeds):
            _pass_on(output, seed, pending, leaf_grads)
        for node in topological_order(*pending):
            output_grads = pending.pop(node, None)
            if output_grads is None:
                continue
            input_grads = _backward_node(node, output_grads)
            for arg, needed, grad in zip(node.inputs, node.needs_input_grad, input_grads):
                if needed and grad is not None:
                    _pass_on(arg, _as_input_grad(node, arg, grad), pending, leaf_grads)
            if not retain_graph:
                node.free_saved()
        return leaf_grads
    finally:
        modes.grad_enabled, modes.retain_graph = grad_was_enabled, retained_before


def _pass_on(tensor, grad, pending, leaf_grads) -> None:
    """Add ``grad`` (dL/d tensor) to what ``tensor`` has received so far."""
    if tensor.grad_fn is None:  # a leaf
        before = leaf_grads.get(id(tensor))
        leaf_grads[id(tensor)] = (tensor, grad if before is None else _sum(before[1], grad))
    else:
        received = pending.setdefault(tensor.grad_fn, {})
        before = received.get(tensor._output_index)
        received[tensor._output_index] = grad if before is None else _sum(before, grad)


def _sum(a, b):  # a + b of two gradients: outside create_graph no graph node to record
    return a + b if modes.grad_enabled else Tensor._make(a.array + b.array)


def _backward_node(node, output_grads) -> tuple:
    """The node's backward, given dL/d(each output): its kernel's outside create_graph, else
    its own; returns one gradient (or None) per input."""
    grads = [_gradient_of_output(node, index, output_grads) for index in range(len(node.outputs))]
    kernel = node.kernel
    use_kernel = kernel is not None and kernel.backward is not None and not modes.grad_enabled
    anomaly, modes.anomaly = modes.anomaly, False  # (report a nan as this node's backward)
    try:
        input_grads = (kernel if use_kernel else node.function).backward(node, *grads)
    finally:
        modes.anomaly = anomaly
    if type(input_grads) is not tuple:
        input_grads = (input_grads,)
    if len(input_grads) < len(node.inputs):
        raise errors.too_few_gradients(node, input_grads)
    if anomaly:
        arrays = [getattr(g, "array", None) for g in input_grads]
        errors.check_finite(node.name, "backward", arrays, node.inputs)
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
    """The gradient a node's backward returned for input ``arg``, in arg's dtype (float32 *
    float64 gives a float64 gradient; x keeps float32); an error where its shape differs."""
    if grad.array.shape != arg.array.shape:
        raise errors.gradient_of_wrong_shape(node, arg, grad)
    return grad if grad.array.dtype == arg.array.dtype else grad.to(arg.dtype)


def accumulate_into_leaf(leaf, grad, create_graph: bool = False) -> None:
    """leaf.grad += grad, after the leaf's hooks. Outside create_graph ``.grad`` gets memory
    of its own, as PyTorch's AccumulateGrad: ``w.grad.zero_()`` must not change another
    tensor's gradient that shares the array (Add hands both inputs the same one)."""
    grad = _run_hooks(leaf, grad)
    if not create_graph:
        grad = Tensor._make(grad.array.copy())
    leaf.grad = grad if leaf.grad is None else leaf.grad + grad


from minigrad.tensor import Tensor  # noqa: E402  (tensor.py imports this module first)
