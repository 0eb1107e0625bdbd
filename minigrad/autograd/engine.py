"""The backward pass: walk the graph from the output to the leaves, applying the chain rule.

    1. Order the nodes so that each comes after every node that uses its outputs
       (a depth-first search with an explicit stack: no recursion, so a 100,000-node chain
       is fine under Python's default recursion limit).
    2. Seed dL/dL = 1 (or the given ``gradient``) at the output.
    3. For each node in that order, hand the gradients of its outputs to its ``backward``,
       which returns one gradient per input; add each into the input's pending gradient.
       Leaves (tensors made by the user) collect theirs in ``.grad``.

Every gradient that arrives at a tensor is summed: a tensor used twice gets both
contributions (the multivariate chain rule).
"""

from __future__ import annotations

from minigrad import backend, threads
from minigrad.autograd.function import _as_array, _check_finite
from minigrad.autograd.grad_mode import modes


def topological_order(root_node, *more_roots) -> list:
    """Nodes reachable from the roots, each before the nodes that produced its inputs."""
    if not more_roots:  # a node whose inputs are all leaves (or constants) is the graph
        for arg in root_node.inputs:
            if getattr(arg, "grad_fn", None) is not None:
                break
        else:
            return [root_node]
    order, visited = [], set()
    stack = [(root_node, False)]
    if more_roots:
        stack = [(node, False) for node in (root_node, *more_roots)][::-1]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        for arg in node.inputs:
            parent = getattr(arg, "grad_fn", None)
            if parent is not None and parent not in visited:
                stack.append((parent, False))
    order.reverse()
    return order


def _seed_gradient(output, gradient):
    if gradient is None:
        if output._data.size != 1:
            raise RuntimeError(
                f"backward: grad can be implicitly created only for a scalar output, but the "
                f"output has shape {output.shape}; pass gradient= (a tensor of that shape), "
                "or reduce the output first, e.g. loss = out.sum()"
            )
        return output.ones_like_detached()
    gradient = output.as_same_kind(gradient)
    given, expected = gradient._data, output._data  # (shapes and dtypes: nothing to wait for)
    if given.shape != expected.shape:
        raise RuntimeError(
            f"backward: gradient has shape {gradient.shape} but the output has shape "
            f"{output.shape}; they must match"
        )
    if given.dtype != expected.dtype:  # as PyTorch: the seed takes the output's dtype
        gradient = gradient.to(output.dtype)
    return gradient


def _accumulate(current, new):
    """current + new. Outside create_graph the sum needs no graph: add the arrays directly."""
    if current is None:
        return new
    if modes.grad_enabled:
        return current + new
    # (0-d + 0-d is a NumPy scalar, not an array: a .grad must hold an array)
    return type(new)._make(_as_array(current.data + new.data, new.data))


def _run_hooks(tensor, grad):
    for hook in tuple(tensor._hooks.values()):
        result = hook(grad)
        if result is not None:
            grad = result
    return grad


def backward(output, gradient=None, retain_graph=False, create_graph=False) -> None:
    """Compute d output / d leaf for every leaf that requires grad; see Tensor.backward."""
    if not output._requires_grad:
        raise RuntimeError(
            "backward: the tensor does not require grad and has no grad_fn: nothing in its "
            "history requires grad (set requires_grad=True on a leaf, or check for no_grad)"
        )
    seed = _seed_gradient(output, gradient)
    run_backward((output,), (seed,), retain_graph or create_graph, create_graph)


def run_backward(outputs, seeds, retain_graph: bool, create_graph: bool, leaf_lock=None) -> None:
    """The walk itself, from one or more outputs at once, each seeded with its dL/d output.
    ``nn.DataParallel`` walks its two halves' graphs this way, from every output of each,
    on two threads at once; a leaf both graphs reach (a parameter) then gets each walk's
    gradient added to its ``.grad`` under ``leaf_lock``, so that neither is lost."""
    backend.finish_stream()  # the forward's last halves: backward reads what they wrote
    grad_was_enabled, retained_before = modes.grad_enabled, modes.retain_graph
    modes.grad_enabled = create_graph  # as ``with set_grad_enabled(create_graph)``
    modes.retain_graph = retain_graph
    try:
        pending = {}  # node -> {output index: dL/d(that output)}, summed as they arrive
        claimed = set()  # memory that a leaf's .grad must not share (see _owned)
        for output, seed in zip(outputs, seeds):
            claimed.add(id(backend.memory_owner(seed._data)))
            node, index = output.grad_fn, output._output_index
            if node is None:  # backward on a leaf: its gradient is the seed itself
                _finish_leaf(output, seed, claimed, leaf_lock)
            elif node not in pending:
                pending[node] = {index: seed}
            else:
                pending[node][index] = _accumulate(pending[node].get(index), seed)

        leaf_grads = {}
        for node in topological_order(*pending) if pending else ():
            output_grads = pending.pop(node, None)
            if output_grads is None:
                continue
            _backward_node(node, output_grads, pending, leaf_grads, claimed)
            if not retain_graph:
                node.free_saved()
        threads.finish_posted()  # the helper's last weight gradients (ops.linalg)
        for leaf, grad in leaf_grads.values():
            _finish_leaf(leaf, grad, claimed, leaf_lock)
    finally:
        threads.finish_posted()  # (after an error: leave the helper nothing of ours to do)
        modes.grad_enabled, modes.retain_graph = grad_was_enabled, retained_before


def _finish_leaf(leaf, grad, claimed, lock=None) -> None:
    if leaf._hooks:
        grad = _run_hooks(leaf, grad)
    if not modes.grad_enabled:
        grad = _owned(grad, claimed)
    if lock is None:
        current = leaf.grad
        leaf.grad = grad if current is None else _accumulate(current, grad)
        return
    with lock:  # read, add and write .grad as one step
        leaf.grad = _accumulate(leaf.grad, grad)


def _owned(grad, claimed):
    """``grad``, or a copy where its array is not this leaf's alone to keep and change, as
    PyTorch's AccumulateGrad copies: a broadcast view (a sum's gradient is dL/dy spread
    over x without a copy), or memory that a seed, a retained gradient or another leaf's
    gradient also holds (Add hands both its inputs the same array). Then ``w.grad.zero_()``
    or ``w.grad *= 0.5`` changes w's gradient and nothing else. ``claimed``: the ids of the
    arrays that own such memory, for this backward pass."""
    array = grad._data
    owner = backend.owner_if_writable(array)
    if owner is None or id(owner) in claimed:
        return type(grad)._make(array.copy())
    claimed.add(id(owner))
    return grad if grad.grad_fn is None else grad.detach()  # (a seed may have a history)


def _backward_reporting_as_node(node, grads):
    """Run a node's backward with the per-op forward checks of detect_anomaly off, so that a
    nan or inf it makes is reported as this node's backward (``Sqrt backward``), not as the
    forward of an op that backward is written with (``Div forward``)."""
    modes.anomaly = False
    try:
        return node.function.backward(node, *grads)
    finally:
        modes.anomaly = True


def _zeros(node, index):
    """dL/d(output) = 0 for an output of a multi-output op that was dropped unused."""
    from minigrad.tensor import Tensor

    shape, dtype, xp = node.output_specs[index]
    return Tensor._make(xp.zeros(shape, dtype))


def _backward_node(node, output_grads, pending, leaf_grads, claimed) -> None:
    outputs = node.outputs
    tensor = outputs[0]() if len(outputs) == 1 else None
    if tensor is not None and not (tensor._hooks or tensor._retains_grad):
        grads = (output_grads[0],)  # the common case: one output, nothing to call on it
    else:
        grads = _gradients_of_outputs(node, output_grads, claimed)

    if modes.anomaly:
        input_grads = _backward_reporting_as_node(node, grads)
    else:
        input_grads = node.function.backward(node, *grads)
    if type(input_grads) is not tuple:
        input_grads = (input_grads,)
    inputs = node.inputs
    if len(input_grads) < len(inputs):
        raise RuntimeError(
            f"{node.name}.backward returned {len(input_grads)} gradients for {len(inputs)} inputs"
        )
    if modes.anomaly or modes.record_edge_grads:
        _check_and_record(node, input_grads)

    for arg, needed, grad in zip(inputs, node.needs_input_grad, input_grads):
        if not needed or grad is None:
            continue
        array, arg_array = grad._data, arg._data  # (shapes and dtypes: nothing to wait for)
        if array.shape != arg_array.shape or array.dtype != arg_array.dtype:
            grad = _as_input_grad(node, arg, grad)
        parent = arg.grad_fn
        if parent is None:  # a leaf: its gradient goes to .grad at the end of the walk
            key = id(arg)
            if key in leaf_grads:  # a leaf used twice: both gradients must be complete
                threads.finish_posted()
                grad = _accumulate(leaf_grads[key][1], grad)
            leaf_grads[key] = (arg, grad)
        else:
            slot = pending.get(parent)
            if slot is None:
                pending[parent] = {arg._output_index: grad}
            else:
                slot[arg._output_index] = _accumulate(slot.get(arg._output_index), grad)


def _as_input_grad(node, arg, grad):
    """The gradient a node's backward returned for input ``arg``, in arg's dtype (float32 *
    float64 gives a float64 gradient; x keeps float32); an error where its shape differs."""
    if grad.shape != arg.shape:
        position = next(i for i, a in enumerate(node.inputs) if a is arg)
        raise RuntimeError(
            f"{node.name}.backward returned a gradient of shape {grad.shape} for input "
            f"{position} of shape {arg.shape}"
        )
    return grad.to(arg.dtype) if grad.dtype != arg.dtype else grad


def _check_and_record(node, input_grads) -> None:
    """What detect_anomaly and viz.record_grads() add to each node's backward: a check that
    the gradients are finite, and the norm of each one that reaches an input."""
    threads.finish_posted()  # gradients the helper is still computing: read them finished
    if modes.anomaly:
        arrays = [getattr(g, "data", None) for g in input_grads]
        _check_finite(node.name, "backward", arrays, node.inputs)
    if modes.record_edge_grads:
        node.edge_grad_norms = [
            _as_input_grad(node, arg, grad).norm_value() if needed and grad is not None else None
            for arg, needed, grad in zip(node.inputs, node.needs_input_grad, input_grads)
        ]


def _gradients_of_outputs(node, output_grads, claimed) -> list:
    """dL/d(each output of node), after the hooks of each output and its retained .grad;
    zeros for an output that got no gradient (one of several, dropped unused)."""
    grads = []
    for index, ref in enumerate(node.outputs):
        grad = output_grads.get(index)
        tensor = ref()
        if grad is not None and tensor is not None:
            if tensor._hooks:
                grad = _run_hooks(tensor, grad)
            if tensor._retains_grad:
                tensor.grad = _accumulate(
                    tensor.grad, grad if modes.grad_enabled else grad.detach()
                )
                claimed.add(id(backend.memory_owner(tensor.grad.data)))  # (see _owned)
        if grad is None:
            grad = tensor.zeros_like_detached() if tensor is not None else _zeros(node, index)
        grads.append(grad)
    return grads
