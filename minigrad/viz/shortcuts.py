"""Gradient shortcuts: the additions ``y = a + F(a)`` that hand the gradient straight back.

An addition node ``y = a + b`` is a shortcut at ``a`` when ``b`` depends on ``a`` and also on
some parameter (a leaf that requires grad) that ``a`` does not depend on. The edge ``a -> y``
then skips the learned branch ``b = F(a)``: in backward it carries dL/dy to ``a`` unchanged
(d(a + F(a))/da = I + dF/da, and this edge is the I), while the branch carries
dL/dy * dF/da. The parameter condition keeps plain arithmetic such as
``u + 0.044715 * u**3`` inside a composite GELU from counting: that ``b`` depends on ``u``
but adds no parameter of its own.

Found from the graph alone, whatever code built it, and whatever the operand order
(``F(h) + h`` is a shortcut at ``h``).

Both operands can never qualify at once: a shortcut at ``a`` needs ``a`` upstream of ``b``,
one at ``b`` needs ``b`` upstream of ``a``, and a computation graph has no cycles. (``h + h``
has ``a`` and ``b`` the same tensor, which adds no parameter, so it is no shortcut either.)

How dependence is computed: one pass over the nodes in run order, carrying per node two
bitsets (Python ints), so each test is a few integer operations even on 10^4+ nodes:

    params[node]  bit k set when the node depends on parameter k
    uses[node]    bit j set when the node depends on operand j of some addition
                  (only tensors that are operands of an Add get a bit: few of them)
"""

from __future__ import annotations

from dataclasses import dataclass

from minigrad.autograd.function import Context
from minigrad.ops.arithmetic import Add
from minigrad.tensor import Tensor
from minigrad.viz.graph import Graph, collect_graph


@dataclass(frozen=True, eq=False)
class Shortcut:
    """``out = skip + branch`` where ``branch = F(skip)`` with parameters of its own.

    ``skip``, ``branch`` and ``out`` are the live tensors of the graph; ``node`` is the Add
    node and ``skip_position`` the input slot (0 or 1) the skip enters it by.
    """

    skip: Tensor
    branch: Tensor
    out: Tensor
    node: Context
    skip_position: int

    @property
    def branch_position(self) -> int:
        return 1 - self.skip_position

    def __repr__(self) -> str:
        return (
            f"Shortcut(skip {tuple(self.skip.shape)} + branch {tuple(self.branch.shape)} "
            f"-> out {tuple(self.out.shape)}, node #{self.node.seq})"
        )


def find_shortcuts(output: Tensor) -> list:
    """Every gradient shortcut that ``output`` depends on, in the order the additions ran."""
    return shortcuts_in(collect_graph(output))


def shortcuts_in(graph: Graph) -> list:
    """``find_shortcuts`` on a graph already collected (see ``viz.graph.collect_graph``)."""
    additions = [node for node in graph.nodes if _is_tensor_addition(node)]
    if not additions:
        return []

    # the bit of each parameter, and of each tensor that is an operand of an addition
    param_bit = {id(leaf): 1 << k for k, leaf in enumerate(graph.leaves) if leaf.requires_grad}
    operand_bit: dict = {}
    for node in additions:
        for operand in node.inputs:
            operand_bit.setdefault(id(operand), 1 << len(operand_bit))

    params: dict = {}  # id(node) -> parameters it depends on
    uses: dict = {}  # id(node) -> addition operands it depends on (strictly upstream)
    for node in graph.nodes:
        node_params = node_uses = 0
        for arg in node.inputs:
            if not isinstance(arg, Tensor):
                continue
            node_params |= _params_of(arg, params, param_bit)
            node_uses |= operand_bit.get(id(arg), 0)
            if arg.grad_fn is not None:
                node_uses |= uses[id(arg.grad_fn)]
        params[id(node)], uses[id(node)] = node_params, node_uses

    found = []
    for node in additions:
        for skip_position in (0, 1):
            skip, branch = node.inputs[skip_position], node.inputs[1 - skip_position]
            # branch depends on skip: skip's bit is upstream of branch's node
            if branch.grad_fn is None or not uses[id(branch.grad_fn)] & operand_bit[id(skip)]:
                continue
            # ... and on a parameter that skip does not depend on
            own_params = _params_of(branch, params, param_bit) & ~_params_of(
                skip, params, param_bit
            )
            if own_params:
                out = node.outputs[0]()
                found.append(Shortcut(skip, branch, out, node, skip_position))
                break  # at most one operand qualifies (see the module docstring)
    return found


def _is_tensor_addition(node: Context) -> bool:
    return (
        node.function is Add
        and len(node.inputs) == 2
        and all(isinstance(arg, Tensor) for arg in node.inputs)
    )


def _params_of(tensor: Tensor, params: dict, param_bit: dict) -> int:
    """The parameters ``tensor`` depends on: itself if it is one, else those of its node."""
    if tensor.grad_fn is None:
        return param_bit.get(id(tensor), 0)
    return params[id(tensor.grad_fn)]
